// The files a sweep writes about its runs -- sweep.json and each shard's
// shard-K-of-N.json (train/sweep.h: run_json, config_json) -- read back and
// checked as strictly as flags, the same way by every command that reads one:
// --collect (the shards' files), --redraw and --resume (sweep.json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/sweep.h"
#include "train/sweep_grid.h"

namespace headlab::train {

// j[key], a whole number in [lo, hi]; a UsageError naming `where` otherwise.
int64_t file_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& where);

// One entry of a file's "runs", checked: its "dir" one of `plan`'s runs
// (returned with the plan's settings, at `index` in it), "seconds" >= 0 and a
// "status"; a run that did not finish also its "exit_code" (0 to 255) and
// "error". A finished run's results are not read here: --collect reads them
// from its heads.json. UsageError naming `where`.
struct RunEntry {
  std::size_t index = 0;
  SweepRun run;
};
RunEntry run_entry(const nlohmann::json& r, const std::vector<SweepRun>& plan, const std::string& where);

// A sweep's file as the sweep wrote it: "format" headlab-sweep/1, the plan
// (plan_from_json, as --resume reads it), the training "config"
// (stored_config, and valid), "runs" with every entry checked as --collect checks a
// shard's (run_entry; each folder once) and a finished run's results of the
// types the page draws ("loss", "accuracy" and "specialized_step" numbers or
// null, "roles_found" a boolean or null or, in an older file, absent,
// "head_results" a list of objects), and "configs" and "flags" (when
// there) lists of objects. Returns the plan; a UsageError names `where`, the
// key and the value.
SweepPlan check_sweep_file(const nlohmann::json& file, const std::string& where);

}  // namespace headlab::train

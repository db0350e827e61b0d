// The run folder of `headlab train --out DIR` (README.md, "The run folder"):
// config.json, checkpoint.safetensors, metrics.jsonl, heads.json,
// report.html and train.log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab::train {

struct RunFolder {
  std::string dir;

  std::string config() const { return dir + "/config.json"; }
  std::string checkpoint() const { return dir + "/checkpoint.safetensors"; }
  std::string metrics() const { return dir + "/metrics.jsonl"; }
  std::string heads() const { return dir + "/heads.json"; }
  std::string report() const { return dir + "/report.html"; }
  std::string log() const { return dir + "/train.log"; }
  // The folder's own name ("first-prev-pair-20261201-120000" for runs/first-prev-pair-20261201-120000/).
  std::string name() const;
};

// A fresh folder name under runs/: runs/<task>-<YYYYmmdd-HHMMSS>[-N].
std::string default_run_dir(const std::string& task);

// Creates DIR for a new run. An existing DIR that holds files is a UsageError
// unless `force` (then the run's own files are replaced; nothing else is touched).
RunFolder create_run_folder(const std::string& dir, bool force);

// An existing run folder; a UsageError if it holds no checkpoint.
RunFolder open_run_folder(const std::string& dir);

// Writes `text` to `path` atomically (temporary file, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

// Every JSON line of metrics.jsonl (a missing file gives none). A malformed
// line can only be a write cut short by a kill: it and what follows are dropped.
std::vector<nlohmann::json> read_metrics(const std::string& path);

// Keeps only the lines with "step" <= max_step (a resumed run rewrites the
// steps after its checkpoint).
void truncate_metrics(const std::string& path, int64_t max_step);

}  // namespace headlab::train

// The plan of a grid sweep: `headlab sweep --lr 1e-3,1e-2 --layers 1,2
// --heads 1,2 --seeds 0-4` trains the cross product of the listed values.
// Here: which training flags take a list, how a list is read (from the
// command line and, as strictly, from a saved plan), the cells of the cross
// product, the runs of the plan, and the keys in which two plans differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/config.h"
#include "train/sweep.h"

namespace headlab::train {

// At most this many runs in one sweep (and shards of one), as for --seeds.
inline constexpr std::size_t kMaxSweepRuns = 10000;
// At most this many values in one flag's list (seeds: kMaxSweepRuns).
inline constexpr std::size_t kMaxGridValues = 1000;
// --heads takes at most this many heads per block.
inline constexpr int64_t kMaxSweepHeads = 1024;

// The accuracy a run must reach to count as trained when neither
// --target-accuracy nor the task says (default_target_accuracy).
inline constexpr double kDefaultTargetAccuracy = 0.99;

// Whether a training flag ("lr", "layers", "optimizer", "attn-only") takes a
// comma list in a sweep: every number, every choice and every switch (true,false),
// except what the sweep sets per run itself (seed, heads, threads), file names
// (data, eval-data, init) and --betas (itself a list).
bool is_grid_flag(const std::string& flag);

// One varied flag: its values in the order given, each as config.json holds it.
struct GridAxis {
  std::string flag;  // "lr"
  std::vector<nlohmann::json> values;
};

// "1e-3,3e-3" (a number flag), "1-3,8" (a whole-number flag: ranges too),
// "adamw,sgd" (a choice), "true,false" (a switch: also on,off, 1,0 or yes,no;
// JSON booleans, as config.json holds the switch): the values of `flag`. A
// UsageError names --flag and the item when one is not of the flag's type, is
// not finite, repeats, or when the list is empty or longer than kMaxGridValues.
GridAxis parse_grid_axis(const std::string& flag, const std::string& text);

// The plan: the cross product of the axes (in the order of the training
// flags, TrainConfig::visit_fields; the first varies slowest), then of the
// head counts, then of the seeds (fastest).
struct SweepPlan {
  std::vector<GridAxis> axes;  // flags with more than one value
  std::vector<int64_t> heads, seeds;
  double target_accuracy = kDefaultTargetAccuracy;

  std::vector<SweepCell> cells() const;
  std::vector<SweepRun> runs() const;  // cells() x seeds, each with its folder name
  // The flags a chart is drawn for: every axis, and "heads" when it has more than one value.
  std::vector<std::string> varied() const;
  // A UsageError naming `where` unless the plan has 1 to kMaxSweepRuns runs.
  void check_size(const std::string& where) const;
};

// --target-accuracy's default for a sweep of `base` and `axes`: the task's own
// target where it defines one (train::suggested_model's: induction 0.9), else
// kDefaultTargetAccuracy -- also for a --data sweep, and for a --task list
// whose tasks' targets differ.
double default_target_accuracy(const TrainConfig& base, const std::vector<GridAxis>& axes);
// "induction 0.9": each task that defines its own target, for --help.
std::string task_targets_text();

// The config of one cell: `base` with the cell's settings and head count.
TrainConfig cell_config(const TrainConfig& base, const SweepCell& cell);

// {"lr": [0.001, 0.01], "layers": [1, 2]}: the axes as sweep.json stores them.
nlohmann::ordered_json grid_json(const std::vector<GridAxis>& axes);

// A saved plan (sweep.json, a shard's file), checked as strictly as the
// command line checks its flags: "seeds", "heads", "grid" (absent: none) and
// "target_accuracy". A UsageError names `source`, the key and the value.
SweepPlan plan_from_json(const nlohmann::json& saved, const std::string& source);

// Checks a list of whole numbers read from a file as parse_int_list checks
// flags: each at least `min_value` (and at most `max_value`), none repeated,
// at most `max_items`. Throws UsageError naming `what`.
std::vector<int64_t> checked_int_list(const nlohmann::json& values, const std::string& what, int64_t min_value,
                                      int64_t max_value, std::size_t max_items);

// The keys in which a run folder's config.json (`run`) departs from what the
// plan trains there (`planned`: cell_config's with the run's seed), as
// differing_keys says them: a run extended (`train --resume RUN --steps N`)
// or edited outside the sweep. What `headlab train` derives from the plan
// (derive_run_settings for one process: the micro-batches, a decaying
// schedule's horizon, the data files' absolute paths) and the thread count,
// which changes nothing trained, are no departure.
std::vector<std::string> run_departures(TrainConfig planned, const TrainConfig& run);

// The keys in which two JSON objects differ, each as "steps 20 vs 40" (a key
// only one holds: "d-model 32 vs none"), in the order of `a` then of `b`.
std::vector<std::string> differing_keys(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace headlab::train

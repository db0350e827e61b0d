// Checkpoint history: with --snapshot-every N the trainer keeps the
// checkpoint of every N-th step as DIR/snapshots/step-000500.safetensors
// (the same writer as checkpoint.safetensors: atomic, and refused when not
// finite), at most --keep-snapshots of them. eval, analyze and --init read a
// snapshot as they read any checkpoint; `analyze RUN --step N` picks one, and
// report.html steps each head's attention through them (snapshot_views).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/html_report.h"
#include "train/tasks.h"

namespace headlab::train {

// DIR/snapshots and the snapshot of `step` in it (step-000500.safetensors).
std::string snapshots_dir(const std::string& run_dir);
std::string snapshot_path(const std::string& run_dir, int64_t step);

// The step of a snapshot file's name (step-000500.safetensors: 500), or -1
// for any other name.
int64_t snapshot_step(const std::string& file_name);

// The steps that have a snapshot in the run folder, ascending.
std::vector<int64_t> snapshot_steps(const std::string& run_dir);

// The folder `analyze RUN --step N` writes the snapshot's analysis into:
// DIR/snapshots/step-000500 for step-000500.safetensors.
std::string snapshot_analysis_dir(const std::string& run_dir, int64_t step);

// The snapshot of `step`; a UsageError naming the steps there are (or how to
// get some) when that step has none, and, when an analysis of that step's
// snapshot is still there, where it is.
std::string find_snapshot(const std::string& run_dir, int64_t step);

// Removes the oldest snapshots beyond the newest `keep` (0: keeps all). Only
// the snapshot files: the folder an `analyze --step N` wrote for one is the
// user's result and stays (snapshot_steps never lists it).
void prune_snapshots(const std::string& run_dir, int64_t keep);

// Each snapshot's head labels on `eval` and attention on its row `example`
// (one forward pass of the batch each), for report.html's slider; none
// without snapshots. In f32 under any precision, as the rest of the head
// analysis.
std::vector<analysis::SnapshotView> snapshot_views(const std::string& run_dir, const Batch& eval, int64_t example);

}  // namespace headlab::train

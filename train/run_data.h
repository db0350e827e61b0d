// The data files a checkpoint's run reads again (--resume, eval RUN, analyze
// RUN, Model.task_batch): checked against the size and hash the checkpoint
// recorded, before they are parsed, so that a changed file is reported as
// changed, not as a line that no longer parses or sizes that no longer fit.
//
// A run names its files by absolute path, so a run folder moved or copied
// (`mv runs/x runs/y`) still names the old one. When that file is missing or
// has changed, the run folder's own file of the same name (RUN/data.jsonl, as
// train(data=rows) writes it) is read instead if it has the recorded size and
// hash: the config then names it, and a note on stderr says so. A file whose
// hash differs is never read.
#pragma once

#include <string>

#include "train/checkpoint.h"
#include "train/config.h"

namespace headlab::train {

// The run folder of the checkpoint at `path`: the folder it is in, or RUN
// for a snapshot RUN/snapshots/step-N.safetensors.
std::string run_folder_of(const std::string& checkpoint_path);

// Checks `config`'s --data and --eval-data against `info`'s record of them
// (a file an older checkpoint has no record of is not checked). A file
// missing or changed is replaced in `config` by `run_dir`'s file of its name
// (absolute) when that one has the recorded size and hash, with a one-line
// note on stderr when `note`; otherwise a UsageError naming both files and
// how to get back. Reads the files once more: they must be regular files.
void locate_run_data(const CheckpointInfo& info, TrainConfig& config, const std::string& run_dir, bool note);

// A UsageError unless the bytes `task` read from `config`'s files (one
// replaced between the check above and the parse) are the ones the
// checkpoint recorded.
void check_data_unchanged(const CheckpointInfo& info, const TrainConfig& config, const Task& task);

}  // namespace headlab::train

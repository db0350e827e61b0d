// Whether a run folder's checkpoint belongs to the run its other files
// describe. Another run's checkpoint.safetensors copied into the folder would
// otherwise be resumed there: the other run's task and model continued, its
// steps appended to this folder's metrics.jsonl, its settings written over
// config.json. The witnesses (README.md, "The run folder"):
//   - config.json and the checkpoint's "config" metadata agree on every key
//     both hold, except those a resume may change (`may_change`: config.json
//     is rewritten when a resume starts, the checkpoint only at its next
//     save), and the checkpoint's step is within config.json's --steps;
//   - the loss of metrics.jsonl's line at the step of the checkpoint's last
//     log line (its "trainer" metadata, "logged") is the one the checkpoint
//     recorded. A line that is missing gives no verdict: a resume with
//     another --log-every drops a line that is off its grid.
// A witness the folder or an older checkpoint does not have (no config.json,
// no metrics.jsonl, a checkpoint from before "logged") is skipped.
#pragma once

#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/run_folder.h"

namespace headlab::train {

// Throws UsageError naming the folder, each file that disagrees and how
// (the differing keys with both values, the step, the loss).
void check_checkpoint_is_the_folders(const RunFolder& folder, const Checkpoint& checkpoint,
                                     const std::vector<std::string>& may_change);

}  // namespace headlab::train

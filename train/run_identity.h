// Whether a run folder's checkpoint belongs to the run its other files
// describe. Another run's checkpoint.safetensors copied into the folder would
// otherwise be resumed there: the other run's task and model continued, its
// steps appended to this folder's metrics.jsonl, its settings written over
// config.json. The witnesses (README.md, "The run folder"):
//   - config.json and the checkpoint's "config" metadata agree on every key
//     both hold, except those a resume may change (kResumeFlags: config.json
//     is rewritten when a resume starts, the checkpoint only at its next
//     save; nor the data paths of a moved run resumed, which config.json
//     names in the run folder from the resume's start: run_data.h), and the
//     checkpoint's step is within config.json's --steps;
//   - the loss of metrics.jsonl's line at the step of the checkpoint's last
//     log line (its "trainer" metadata, "logged") is the one the checkpoint
//     recorded. A line that is missing gives no verdict: a resume with
//     another --log-every drops a line that is off its grid.
//   - the checkpoint has no "edited" record: weights edited from Python
//     and saved over the run's checkpoint are not the run's.
// A witness the folder or an older checkpoint does not have (no config.json,
// no metrics.jsonl, a checkpoint from before "logged") is skipped.
//
// --resume checks before it continues the run; eval and analyze before they
// take a run folder's checkpoint for the run's (eval RUN, analyze RUN, and
// an analysis written over a run folder's heads.json and report.html).
#pragma once

#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/run_folder.h"

namespace headlab::train {

// Flags a resumed run may change: how long and how it reports, never what it
// trains -- except the learning rate and its schedule's horizon, so that a
// run that diverged can go on from its last good checkpoint with a smaller
// one, and an extended run can decay over its new steps. config.json and
// the checkpoint may disagree on these (above).
inline const std::vector<std::string> kResumeFlags = {
    "steps",     "lr",            "schedule-steps",   "threads",        "micro-batches",
    "log-every", "analyze-every", "checkpoint-every", "snapshot-every", "keep-snapshots"};

// How a refusal names what was asked and the way out:
// "[FLAG: ]PATH is not the checkpoint of the run in DIR (...): WHAT. FIX".
struct CheckpointUse {
  std::string flag;  // "--resume RUN", or "" when the command's name says it (eval RUN)
  std::string path;  // the checkpoint as read
  std::string fix;   // what to do instead: a sentence, without its full stop
  std::string prefix() const { return flag.empty() ? "" : flag + ": "; }
};

// Throws UsageError naming the folder, each file that disagrees and how
// (the differing keys with both values, the step, the loss), and `use`'s fix.
void check_checkpoint_is_the_folders(const RunFolder& folder, const Checkpoint& checkpoint, const CheckpointUse& use);

}  // namespace headlab::train

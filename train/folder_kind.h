// What a folder given to a command is, when it is not the kind the command
// reads: a sweep's (whose runs are folders in it), a run's, an analysis's.
// A refusal names what was given and what to give instead, rather than a
// file the folder never had ("sw/checkpoint.safetensors cannot be opened").
#pragma once

#include <string>

namespace headlab::train {

// The marker's kind of `dir` (run_folder.h's folder_marker), with a sweep
// from before the marker recognized too: "run", "sweep", "analysis", or ""
// for a folder headlab did not make (or none at all).
std::string folder_kind(const std::string& dir);

// One run of the sweep folder `dir`, the first by name ("sw/h2-s0"), or "".
std::string a_run_of(const std::string& sweep_dir);

// " (it analyzed RUN/checkpoint.safetensors)": the checkpoint the analysis in `dir`
// read, as its heads.json records it (analyze writes it), or "".
std::string analyzed_from(const std::string& dir);

// Why `target`, given as a run folder or a checkpoint, has no checkpoint to
// read: no such path, a run still training before its first checkpoint, a
// sweep's folder (naming one of its runs), a folder an analysis wrote (a
// snapshot's, after --keep-snapshots removed the snapshot), or another
// folder, to which `fix` says what the command takes ("give a run folder or
// a checkpoint file").
std::string no_checkpoint(const std::string& target, const std::string& fix);

}  // namespace headlab::train

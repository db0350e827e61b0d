// The run folder of `headlab train --out DIR` (README.md, "The run folder"):
// config.json, checkpoint.safetensors, metrics.jsonl, heads.json,
// report.html, train.log, train.lock and the marker .headlab.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab::train {

// An exclusive advisory lock (an open file description lock, fcntl
// F_OFD_SETLK) on DIR/train.lock: one writer at a time per run folder, two
// RunLocks of one process included. The kernel releases it when the process
// ends, however it ends (even SIGKILL), so a lock is never stale. Readers
// (eval, analyze) do not take it.
class RunLock {
 public:
  // Throws std::runtime_error naming the PID that holds the lock.
  explicit RunLock(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

struct RunFolder {
  std::string dir;

  // DIR/name, joined as paths are: "runs/x/" gives "runs/x/report.html", not "runs/x//report.html".
  std::string file(const std::string& name) const { return (std::filesystem::path(dir) / name).string(); }
  std::shared_ptr<RunLock> lock;  // held by the folders of train and resume

  std::string config() const { return file("config.json"); }
  std::string checkpoint() const { return file("checkpoint.safetensors"); }
  std::string metrics() const { return file("metrics.jsonl"); }
  std::string heads() const { return file("heads.json"); }
  std::string report() const { return file("report.html"); }
  std::string log() const { return file("train.log"); }
  std::string lock_file() const { return file("train.lock"); }
  // The folder's own name ("first-prev-pair-20261201-120000" for runs/first-prev-pair-20261201-120000/).
  std::string name() const;
};

// The marker headlab writes into each folder it creates for its output: a
// file DIR/.headlab holding {"headlab": KIND} ("run", "sweep"). Only a folder
// whose marker says so is one headlab replaces files in or deletes from
// (--force, a sweep's re-run): a folder of the user's files never is.
inline constexpr const char* kFolderMarker = ".headlab";
// Writes DIR's marker (atomically; DIR exists).
void write_folder_marker(const std::string& dir, const std::string& kind);
// The kind DIR's marker names, or "" when DIR has no marker (or one headlab
// did not write: not a regular file, not that JSON).
std::string folder_marker(const std::string& dir);

// An input of a command, as its messages name it ("the checkpoint", "--data").
struct NamedInput {
  std::string what, path;  // an empty path: no such input
};

// An output file given by the user (`flag`, e.g. "--dump-logits") that must
// not destroy anything, checked before the work: a UsageError if it is one of
// `inputs` (or a file in an input that is a folder); if it lies inside a run
// or a sweep folder (one marked so, or holding a checkpoint.safetensors or a
// sweep.json), whose files are headlab's own; if it exists and is not a
// regular file (a folder, a link, a FIFO, a device); or if its folder does
// not exist.
void check_output_is_no_input(const std::string& flag, const std::string& path, const std::vector<NamedInput>& inputs);

// A fresh folder name under runs/: runs/<task>-<YYYYmmdd-HHMMSS>[-N].
std::string default_run_dir(const std::string& task);

// Creates DIR for a new run, locks it and marks it a run folder. A DIR
// whose lock another process holds (a run in it, or one starting there, not
// marked yet) is refused as RunLock refuses it. An existing DIR that holds
// files (other than a train.lock nobody holds) is a UsageError unless it is
// marked a run folder and `force` is given: then the old run's own files
// (its snapshots, and the folders marked as headlab's analyses of it:
// analysis-TASK/, snapshots/step-NNNNNN/) are removed before this returns, so
// nothing of it can be mistaken for the new run's (nothing else in DIR is
// touched). A folder without the marker is
// never cleared.
// `last_snapshot` (>= 0 when the run writes snapshots: the last step it may
// snapshot) adds snapshots/ to the paths check_run_paths probes. A probe that
// fails removes the folders this call created.
RunFolder create_run_folder(const std::string& dir, bool force, int64_t last_snapshot = -1);

// An existing run folder, locked; a UsageError if it holds no checkpoint
// and no snapshot.
// (Its paths are probed once the resumed settings are known: check_run_paths.)
RunFolder open_run_folder(const std::string& dir);

// Every file a run writes into its folder -- checkpoint, config.json,
// metrics.jsonl, heads.json, report.html, train.log and, with `last_snapshot`
// >= 0, snapshots/ -- under the temporary name the atomic writer gives it
// (the longest), created and removed again: a folder too deep for the file
// system's path length, or one this process cannot write, is a UsageError
// naming the path (shortened, shown_path) and the system's reason before
// step 1 rather than an error at the first checkpoint.
void check_run_paths(const RunFolder& run, int64_t last_snapshot = -1);

// A path as messages show it: whole up to 160 characters, else its first and
// last 60 and its length, so that the reason after it still fits the line.
std::string shown_path(const std::string& path);

// Writes `text` to `path` with core::write_file_atomic: atomically, and never
// over anything but a regular file.
void write_file_atomic(const std::string& path, const std::string& text);

// Every JSON line of metrics.jsonl (a missing file gives none). A malformed
// last line is a write cut short by a kill, and is dropped; a malformed line
// with lines after it was not written so (the file was edited or damaged):
// UsageError naming the file and line, so that nothing after it is lost by a
// resume's rewrite.
std::vector<nlohmann::json> read_metrics(const std::string& path);

// When a process holds DIR's train.lock (a run training there) and DIR has
// no checkpoint.safetensors yet: why there is nothing to read, naming the
// PID, the step of the first checkpoint (from its config.json) and
// --checkpoint-every, for eval, analyze and the Python package; else "".
std::string still_training_without_checkpoint(const std::string& dir);

// Keeps only the lines with "step" <= max_step (a resumed run rewrites the
// steps after its checkpoint), less the fields `drop_at_max` in the line of
// max_step (which goes when only its step is left). Returns the steps of the
// lines dropped after max_step, in file order.
std::vector<int64_t> truncate_metrics(const std::string& path, int64_t max_step,
                                      const std::vector<std::string>& drop_at_max = {});

// Adds `fields` to the line of `step` if it has none of them (the final
// analysis of a run whose last step was off the --analyze-every grid);
// nothing if there is no such line. Returns whether the file changed.
bool complete_metrics_line(const std::string& path, int64_t step, const nlohmann::json& fields);

}  // namespace headlab::train

// The processes of `headlab sweep`: one `headlab train` child per run, up to
// a number at a time, each with its output in a log file; SIGINT, SIGTERM and
// SIGHUP reach every child, and no child outlives the sweep.
//
// Runs are processes, not threads: each trains single-threaded and
// independently of the others, a crash stays in its folder, and a stop
// signal reaches every run through the same path as `headlab train`'s own.
#pragma once

#include <signal.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace headlab::train {

// Blocks the signals the sweep waits for (SIGINT, SIGTERM, SIGHUP, SIGCHLD)
// for as long as it lives. Create it first of all, before any thread exists
// (threads started later inherit the mask); each child gets the old mask.
class SweepSignals {
 public:
  SweepSignals();
  // A pending SIGCHLD is then discarded, a pending SIGINT or SIGTERM goes to the stop handler.
  ~SweepSignals();
  SweepSignals(const SweepSignals&) = delete;
  SweepSignals& operator=(const SweepSignals&) = delete;
  const sigset_t& old() const { return old_; }

 private:
  sigset_t old_;
};

// A child to start: its arguments (argv[0] included; the program is this one)
// and the file its stdin-less output goes to.
struct ChildJob {
  std::vector<std::string> argv;
  std::string log_path;
};

// What a finished child left: its exit status (128 + signal when killed) and wall time.
struct ChildExit {
  int exit_code = 0;
  double seconds = 0;
};

// Opens `path` for a child's output: created or truncated, never through a
// symbolic link (O_NOFOLLOW), and never anything but a regular file. Returns
// the descriptor, or -1 with errno set.
int open_log(const char* path);

// Runs `count` jobs, at most `jobs` at a time, in order. For each index,
// `start` returns the child to start, or nullopt when the job needs no process
// (then it reported itself); `done` gets each child's exit. A stop signal
// goes to every running child and starts no new one. Returns the first stop
// signal, or 0.
int supervise(std::size_t count, int jobs, const SweepSignals& signals,
              const std::function<std::optional<ChildJob>(std::size_t)>& start,
              const std::function<void(std::size_t, const ChildExit&)>& done);

}  // namespace headlab::train

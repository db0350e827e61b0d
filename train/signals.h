// SIGINT, SIGTERM and SIGHUP (a closed terminal) ask a run to stop after its
// current step; the trainer polls stop_signal() between steps, saves a
// checkpoint and exits 128 + signal. A failed write to stdout (a closed pipe:
// SIGPIPE is ignored, so the write fails instead of killing the process) is
// reported with request_stop(SIGPIPE) and stops the run the same way.
#pragma once

#include <csignal>
#include <stdexcept>

namespace headlab::train {

// Thrown by throw_if_stopped between pieces of a command's work (eval's
// batches) once a stop signal arrived: the unwinding removes what the command
// had half written (a dump's temporary file), and the CLI exits 128 + signal.
struct Stopped : std::runtime_error {
  explicit Stopped(int sig);
  int signal;
};
void throw_if_stopped();

void install_stop_handlers();
// 0, or the number of the first stop signal received (or requested).
int stop_signal();
// Asks for a stop as if signal `sig` had arrived (async-signal-safe).
void request_stop(int sig);
// Forgets a received signal (tests).
void reset_stop_signal();

// stop_signal(), or else a stop signal that waits blocked (a sweep blocks
// them for its whole life, sweep_supervisor.h): for a wait that only a
// signal can end.
int pending_stop_signal();

// While it lives, SIGINT, SIGTERM and SIGHUP reach the stop flag (unless
// ignored): for a wait on a pipe, which another handler would not end. A
// flag-only handler of the embedding program (Python's) is never seen from
// here, and with SA_RESTART a blocking call would not even return to look.
// Restores the previous handlers, unless install_stop_handlers ran meanwhile
// (a trainer on another thread needs its own).
class StopSignalsCaught {
 public:
  StopSignalsCaught();
  ~StopSignalsCaught();
  StopSignalsCaught(const StopSignalsCaught&) = delete;
  StopSignalsCaught& operator=(const StopSignalsCaught&) = delete;

 private:
  struct sigaction previous_[3];
  bool replaced_[3] = {false, false, false};
  unsigned installs_;  // install_stop_handlers' count when this one installed them
};

}  // namespace headlab::train

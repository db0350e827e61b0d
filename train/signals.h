// SIGINT, SIGTERM and SIGHUP (a closed terminal) ask a run to stop after its
// current step; the trainer polls stop_signal() between steps, saves a
// checkpoint and exits 128 + signal. A failed write to stdout (a closed pipe:
// SIGPIPE is ignored, so the write fails instead of killing the process) is
// reported with request_stop(SIGPIPE) and stops the run the same way.
#pragma once

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

}  // namespace headlab::train

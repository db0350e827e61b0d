// SIGINT and SIGTERM ask a run to stop after its current step; the trainer
// polls stop_signal() between steps, saves a checkpoint and exits 128 + signal.
#pragma once

namespace headlab::train {

void install_stop_handlers();
// 0, or the number of the first stop signal received.
int stop_signal();
// Forgets a received signal (tests).
void reset_stop_signal();

}  // namespace headlab::train

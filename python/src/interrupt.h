// Ctrl-C during a long C++ call (an analysis, a forward pass), which runs
// with the GIL released: Python's SIGINT handler only flags the signal, so its
// KeyboardInterrupt would come once the call returned. While an Interruptible
// lives, the computation's checks (core/interrupt.h) take the GIL now and
// then and run the interpreter's pending signal handlers; the exception one
// raises (KeyboardInterrupt) is thrown through the computation, which stops
// between two of its pieces, and is raised when the call returns.
#pragma once

#include <chrono>
#include <optional>

#include "core/interrupt.h"

namespace headlab::python {

class Interruptible {
 public:
  // With the GIL held. Only on Python's main thread, the one that runs
  // signal handlers; elsewhere it does nothing (as a Python loop there would
  // not be interrupted either).
  Interruptible();

 private:
  std::chrono::steady_clock::time_point last_;  // the last look at the signals
  std::optional<core::InterruptScope> scope_;
};

}  // namespace headlab::python

// Stopping a long computation on request (Ctrl-C) between its pieces rather
// than at its end: a forward pass checks between its blocks, the head
// analysis between its evaluations (analysis/analyze_model.h). What a check
// does is the caller's: the CLI throws train::Stopped once a stop signal
// arrived, the Python package raises KeyboardInterrupt once Python's SIGINT
// handler ran. Without a check installed, check_interrupt() does nothing.
//
// The check belongs to the thread that installed it: work the thread hands to
// others (OpenMP's workers, threads of its own) never runs it, so a check
// throws only where the computation can unwind, and never in a parallel region.
#pragma once

#include <functional>

namespace headlab::core {

// Installs `check` for the calling thread for this object's lifetime (nested
// scopes: the innermost's); the previous one comes back with the destructor.
class InterruptScope {
 public:
  explicit InterruptScope(std::function<void()> check);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  std::function<void()> previous_;
};

// Runs the calling thread's check, if any; it throws to stop the work.
void check_interrupt();

}  // namespace headlab::core

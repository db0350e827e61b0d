#include "core/interrupt.h"

#include <omp.h>

#include <utility>

namespace headlab::core {
namespace {

thread_local std::function<void()> t_check;

}  // namespace

InterruptScope::InterruptScope(std::function<void()> check) : previous_(std::exchange(t_check, std::move(check))) {}

InterruptScope::~InterruptScope() { t_check = std::move(previous_); }

void check_interrupt() {
  // An exception must not leave a parallel region (the installing thread is
  // also its team's first): there the check waits for the region's end.
  if (t_check && !omp_in_parallel()) t_check();
}

}  // namespace headlab::core

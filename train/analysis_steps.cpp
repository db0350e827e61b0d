#include "train/analysis_steps.h"

namespace headlab::train {
namespace {

// 10, 20, 50, 100, 200, 500, ...: one of 1, 2, 5 times a power of ten, >= 10.
bool log_spaced(int64_t step) {
  if (step < 10) return false;
  while (step % 10 == 0 && step >= 100) step /= 10;
  return step == 10 || step == 20 || step == 50;
}

}  // namespace

bool is_analysis_step(int64_t step, int64_t analyze_every) {
  if (analyze_every <= 0 || step <= 0) return false;
  return step % analyze_every == 0 || (step < analyze_every && log_spaced(step));
}

}  // namespace headlab::train

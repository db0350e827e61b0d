// The corrupted input that activation patching patches into, as `headlab
// analyze --patch` draws it and the Python package's
// Model.task_batch(corrupted=True) draws it again.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace headlab::train {

// The stream the task's corruption (Task::corrupt) draws from: its own,
// seeded from the run's seed only, so the corrupted batch never depends on
// the training batches, and anyone with the run's config draws the same.
inline core::Generator patch_corruption_stream(uint64_t run_seed) {
  return core::Generator(run_seed ^ 0x7061746368000000ULL);  // "patch"
}

}  // namespace headlab::train

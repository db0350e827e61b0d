// When a run analyzes its heads: every --analyze-every steps, and before the
// first of those at the log-spaced steps 10, 20, 50, 100, 200, 500, ... so that
// a head's emergence step (the first analyzed step from which its score stays
// above the threshold) is not simply the first --analyze-every.
#pragma once

#include <cstdint>

namespace headlab::train {

// True if step `step` (1-based, after its update) analyzes the heads;
// `analyze_every` 0 means only at the end (never here).
bool is_analysis_step(int64_t step, int64_t analyze_every);

}  // namespace headlab::train

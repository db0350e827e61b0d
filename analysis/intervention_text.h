// The interventions of `headlab analyze --patch` as terminal text: the
// corrupted run, one row per head (task-position scores, direct logit
// attribution, zero / mean / resample ablation, patching share) and the sets
// of heads ablated together.
#pragma once

#include <string>

#include "analysis/run_analysis.h"

namespace headlab::analysis {

std::string intervention_table(const RunAnalysis& run);

}  // namespace headlab::analysis

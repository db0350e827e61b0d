// The circuit analysis as terminal text, a few lines under the head table:
// each head's copying score, the strongest composition into each later head
// against the random baseline, and the pruning curve against random orders.
// Empty when the run carries none of them (e.g. a heads.json from before).
#pragma once

#include <string>

#include "analysis/run_analysis.h"

namespace headlab::analysis {

std::string circuit_text(const RunAnalysis& run);

}  // namespace headlab::analysis

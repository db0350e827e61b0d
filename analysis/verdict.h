// Whether a run's heads specialized, and why (docs/head-metrics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/labels.h"

namespace headlab::analysis {

struct RunAnalysis;

struct Verdict {
  bool specialized = false;
  std::vector<std::string> reasons;  // one sentence each, with the numbers
  int64_t counted_heads = 0;         // pattern-labelled heads whose ablation (if measured) costs accuracy
  int64_t distinct_labels = 0;       // among the counted heads
  std::optional<double> min_js;      // over counted heads with different labels
};

// The verdict on a run whose heads are labelled.
Verdict judge(const RunAnalysis& run, const LabelOptions& options = {});

}  // namespace headlab::analysis

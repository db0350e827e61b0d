// Whether a run's heads specialized, and why (docs/head-metrics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/labels.h"

namespace headlab::analysis {

struct RunAnalysis;

// An expected role (attend.h) and the counted heads that fill it.
struct RoleFound {
  std::string role, pattern;
  std::vector<std::string> heads;  // "L0H1"; empty: not found
};

struct Verdict {
  bool specialized = false;
  // Every expected role is filled (false without expected roles); with
  // `specialized`, what makes a run a success.
  bool roles_found = false;
  std::vector<RoleFound> roles;  // one per expected role, in the task's order
  bool success() const { return specialized || roles_found; }
  std::vector<std::string> reasons;  // one sentence each, with the numbers
  // Pattern-labelled heads whose ablation (if measured) costs accuracy or
  // loss, alone or added to a set of their role (docs/head-metrics.md).
  int64_t counted_heads = 0;
  std::vector<std::string> counted;  // their names ("L0H1"), layer-major; empty in a heads.json from before
  int64_t distinct_labels = 0;       // among the counted heads
  std::optional<double> min_js;      // over counted heads with different labels
};

// The verdict on a run whose heads are labelled.
Verdict judge(const RunAnalysis& run, const LabelOptions& options = {});

}  // namespace headlab::analysis

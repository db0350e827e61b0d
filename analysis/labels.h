// Head labels: the pattern a head follows, if any (docs/head-metrics.md).
#pragma once

#include <compare>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/head_metrics.h"
#include "analysis/patterns.h"

namespace headlab::analysis {

// A head's label: one of the patterns of kPatterns; "diffuse" or "mixed" for
// a head without a clear pattern; "sink" for a first-token head whose
// ablation barely matters.
class Label {
 public:
  constexpr Label() = default;  // mixed
  // The pattern called `name` (a constant expression for a literal name).
  static constexpr Label pattern(std::string_view name) { return Label(pattern_index(name)); }
  static constexpr Label pattern_at(std::size_t index) { return Label(index); }
  static constexpr Label diffuse() { return Label(kPatternCount); }
  static constexpr Label mixed() { return Label(kPatternCount + 1); }
  static constexpr Label sink() { return Label(kPatternCount + 2); }

  constexpr bool is_pattern() const { return value_ < kPatternCount; }
  // The table entry of a pattern label; throws std::invalid_argument for the others.
  const Pattern& entry() const;

  friend constexpr auto operator<=>(const Label&, const Label&) = default;

 private:
  explicit constexpr Label(std::size_t value) : value_(value) {}
  std::size_t value_ = kPatternCount + 1;
};

// Every label: the patterns in table order, then diffuse, mixed and sink.
std::vector<Label> all_labels();
std::string label_name(Label label);  // "previous-token", "first-token", ..., "diffuse", "mixed", "sink"
// Inverse of label_name; throws std::invalid_argument listing the valid names.
Label label_from_name(const std::string& name);
// True for the patterns, false for diffuse, mixed and sink.
inline bool is_pattern(Label label) { return label.is_pattern(); }

// Thresholds of labelling and of the verdict; see docs/head-metrics.md.
struct LabelOptions {
  // A pattern labels a head when its score reaches this...
  double score_threshold = 0.5;
  // ...and beats the runner-up pattern's score by at least this.
  double margin = 0.15;
  // Without a clear pattern: "diffuse" at or above this normalized entropy, else "mixed".
  double diffuse_entropy = 0.8;
  // A first-token head is a "sink" when ablating it raises the loss by at most
  // this many nats (absolute; a negative change counts too). Needs ablation.
  double sink_max_delta_loss = 0.02;
  // Verdict: at least this many distinct pattern labels among the counted heads.
  // Specialization means heads taking different roles, so a one-head model never
  // specializes.
  int64_t min_distinct_labels = 2;
  // Verdict: every two counted heads with different labels differ by at least
  // this mean JS divergence (bits, in [0, 1]).
  double min_js = 0.3;
  // A head with a pattern label is counted only if, when ablation was measured,
  // its ablation costs at least this much accuracy (a fraction: 0.02 = 2 points)
  // or at least min_ablation_loss_rise nats of loss. The loss test counts heads
  // that back each other up: with four heads, ablating one of two
  // previous-token heads barely moves accuracy, but it still costs loss.
  double min_ablation_acc_drop = 0.02;
  double min_ablation_loss_rise = 0.05;
};

struct PatternScore {
  Label pattern;
  double score;
};
// The pattern scores that exist, highest first; ties keep the table's order.
std::vector<PatternScore> ranked_patterns(const HeadScores& scores);

// The label of one head. ablation_delta_loss = loss with the head's gate at 0
// minus the loss without ablation; when absent, no head is called a sink.
Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options);

}  // namespace headlab::analysis

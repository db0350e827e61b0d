#include "analysis/labels.h"

#include <algorithm>
#include <stdexcept>

namespace headlab::analysis {

const Pattern& Label::entry() const {
  if (!is_pattern()) throw std::invalid_argument("Label::entry: '" + label_name(*this) + "' is not a pattern");
  return kPatterns[value_];
}

std::vector<Label> all_labels() {
  std::vector<Label> labels;
  for (std::size_t i = 0; i < kPatternCount; ++i) labels.push_back(Label::pattern_at(i));
  for (Label l : {Label::diffuse(), Label::mixed(), Label::sink()}) labels.push_back(l);
  return labels;
}

std::string label_name(Label label) {
  if (label.is_pattern()) return std::string(label.entry().name);
  if (label == Label::diffuse()) return "diffuse";
  if (label == Label::sink()) return "sink";
  return "mixed";
}

Label label_from_name(const std::string& name) {
  std::string valid;
  for (Label l : all_labels()) {
    if (label_name(l) == name) return l;
    valid += (valid.empty() ? "" : ", ") + label_name(l);
  }
  throw std::invalid_argument("label_from_name: unknown head label '" + name + "'; valid labels: " + valid);
}

std::vector<PatternScore> ranked_patterns(const HeadScores& s) {
  std::vector<PatternScore> r;
  for (std::size_t i = 0; i < kPatternCount; ++i)
    if (s.patterns[i]) r.push_back({Label::pattern_at(i), *s.patterns[i]});
  std::stable_sort(r.begin(), r.end(), [](const PatternScore& a, const PatternScore& b) { return a.score > b.score; });
  return r;
}

Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options) {
  const std::vector<PatternScore> ranked = ranked_patterns(scores);
  const PatternScore& top = ranked[0];
  const double runner_up = ranked.size() > 1 ? ranked[1].score : 0.0;
  if (top.score >= options.score_threshold && top.score - runner_up >= options.margin) {
    if (top.pattern == Label::pattern("first-token") && ablation_delta_loss &&
        *ablation_delta_loss <= options.sink_max_delta_loss)
      return Label::sink();
    return top.pattern;
  }
  return scores.entropy >= options.diffuse_entropy ? Label::diffuse() : Label::mixed();
}

}  // namespace headlab::analysis

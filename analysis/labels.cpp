#include "analysis/labels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include "analysis/nesting.h"

namespace headlab::analysis {

const Pattern& Label::entry() const {
  if (!is_pattern()) throw std::invalid_argument("Label::entry: '" + label_name(*this) + "' is not a pattern");
  return kPatterns[value_];
}

std::vector<Label> all_labels() {
  std::vector<Label> labels;
  for (std::size_t i = 0; i < kPatternCount; ++i) labels.push_back(Label::pattern_at(i));
  for (const Label& l : {Label::diffuse(), Label::mixed(), Label::sink()}) labels.push_back(l);
  return labels;
}

std::string label_name(const Label& label) {
  if (label.is_user()) return label.user_name();
  if (label.is_builtin()) return std::string(label.entry().name);
  if (label == Label::diffuse()) return "diffuse";
  if (label == Label::sink()) return "sink";
  return "mixed";
}

namespace {
std::size_t palette_index(const std::string& name, std::size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: the same colour in every run
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return static_cast<std::size_t>(h % size);
}
}  // namespace

std::string user_ansi_colour(const std::string& name) {
  static const char* const kAnsi[] = {"38;5;43", "38;5;142", "38;5;173", "38;5;99", "38;5;37", "38;5;168"};
  return kAnsi[palette_index(name, std::size(kAnsi))];
}

std::string user_html_colour(const std::string& name) {
  static const char* const kHtml[] = {"#0d9488", "#65a30d", "#c2410c", "#7c3aed", "#0e7490", "#be185d"};
  return kHtml[palette_index(name, std::size(kHtml))];
}

std::string label_key(const Label& label) {
  return label.is_builtin() ? pattern_key(label.entry()) : label_name(label);
}

Label label_from_name(const std::string& name, const std::vector<std::string>& user_patterns) {
  std::string valid;
  for (const Label& l : all_labels()) {
    if (label_name(l) == name) return l;
    valid += (valid.empty() ? "" : ", ") + label_name(l);
  }
  for (const std::string& u : user_patterns) {
    if (u == name) return Label::user(u);
    valid += ", " + u;
  }
  throw std::invalid_argument("label_from_name: unknown head label '" + name + "'; valid labels: " + valid);
}

std::vector<PatternScore> ranked_patterns(const HeadScores& s) {
  std::vector<PatternScore> r;
  for (const UserScore& u : s.user)
    if (u.score) r.push_back({Label::user(u.name), *u.score});
  for (std::size_t i = 0; i < kPatternCount; ++i)
    if (s.patterns[i]) r.push_back({Label::pattern_at(i), *s.patterns[i]});
  std::sort(r.begin(), r.end(), [](const PatternScore& a, const PatternScore& b) {
    return a.score != b.score ? a.score > b.score : a.pattern > b.pattern;
  });
  // Each run of scores within kSameScore of its first is one tie: user patterns (by name), then the table's.
  // Label's order is the table's, then user patterns by name: the reverse for the first, the same for the rest.
  const auto tie_order = [](const PatternScore& a, const PatternScore& b) {
    return a.pattern.is_user() != b.pattern.is_user() ? a.pattern.is_user() : a.pattern < b.pattern;
  };
  for (auto first = r.begin(); first != r.end();) {
    auto last = first;
    while (last != r.end() && first->score - last->score <= kSameScore) ++last;
    std::sort(first, last, tie_order);
    first = last;
  }
  return r;
}

std::optional<double> pattern_score(const HeadScores& scores, const std::string& name) {
  for (std::size_t i = 0; i < kPatternCount; ++i)
    if (kPatterns[i].name == name) return scores.patterns[i];
  const UserScore* u = scores.user_score(name);
  return u ? u->score : std::nullopt;
}

double label_score(const HeadScores& scores, const Label& label) {
  if (label.is_builtin() && scores.patterns[pattern_index(label.entry().name)])
    return *scores.patterns[pattern_index(label.entry().name)];
  if (label.is_user())
    if (const UserScore* u = scores.user_score(label.user_name()); u && u->score) return *u->score;
  return ranked_patterns(scores)[0].score;
}

double label_threshold(const Label& pattern, const LabelSet& set, const LabelOptions& options) {
  const std::optional<double> chance = set.chance ? pattern_score(*set.chance, label_name(pattern)) : std::nullopt;
  return chance ? std::max(options.score_threshold, *chance + options.margin) : options.score_threshold;
}

namespace {

// Whether `p` reaches the score at which its pattern labels a head on the set (label_threshold: the threshold,
// and its chance score plus the margin). The one test of both, so that emergence steps follow the labels.
bool reaches_threshold(const PatternScore& p, const LabelSet& set, const LabelOptions& options) {
  return p.score >= label_threshold(p.pattern, set, options);
}

// The user pattern that takes the label from the built-in patterns it nests
// with (docs/head-metrics.md, "Nested patterns"), the first in `ranked` that
// can: it reaches the threshold and beats its chance score by the margin, no
// pattern nested with it scores a margin more, none that is not nested with
// it scores more (ties apart), and it beats the best of those by the margin.
std::optional<Label> nested_winner(const HeadScores& scores, const std::vector<PatternScore>& ranked,
                                   const LabelOptions& options, const LabelSet& set) {
  for (const PatternScore& candidate : ranked) {
    if (!candidate.pattern.is_user() || !reaches_threshold(candidate, set, options)) continue;
    const std::vector<std::string>& nests_with = scores.user_score(candidate.pattern.user_name())->nests_with;
    if (nests_with.empty()) continue;  // the ordinary rule decides
    bool clear = true;
    double rival = 0.0;  // the best pattern not nested with it
    for (const PatternScore& other : ranked) {
      if (other.pattern == candidate.pattern) continue;
      const double above = other.score - candidate.score;
      if (other.pattern.is_builtin() && nests(nests_with, other.pattern.entry().name)) {
        clear = clear && above < options.margin;
      } else if (std::abs(above) > kSameScore) {
        clear = clear && above < 0;
        rival = std::max(rival, other.score);
      }
    }
    if (clear && candidate.score - rival >= options.margin) return candidate.pattern;
  }
  return std::nullopt;
}

// label_head over the patterns of `scores`, all of them taken as they are.
Label label_all(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options,
                const LabelSet& set) {
  const std::vector<PatternScore> ranked = ranked_patterns(scores);
  if (const std::optional<Label> user = nested_winner(scores, ranked, options, set)) return *user;
  const PatternScore& top = ranked[0];
  double runner_up = 0.0;
  for (std::size_t i = 1; i < ranked.size(); ++i)
    if (top.score - ranked[i].score > kSameScore) {
      runner_up = ranked[i].score;
      break;
    }
  if (reaches_threshold(top, set, options) && top.score - runner_up >= options.margin) {
    if (top.pattern == Label::pattern("first-token") && ablation_delta_loss &&
        *ablation_delta_loss <= options.sink_max_delta_loss)
      return Label::sink();
    return top.pattern;
  }
  return scores.entropy >= options.diffuse_entropy ? Label::diffuse() : Label::mixed();
}

bool names_role(const LabelSet& set, const std::string& pattern) {
  return std::find(set.roles.begin(), set.roles.end(), pattern) != set.roles.end();
}

}  // namespace

Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options,
                 const LabelSet& set) {
  // Without the scored-only user patterns first: a label they would take from (or deny) an expected role's
  // pattern stays the role's, so adding a diagnostic pattern never changes which roles are found.
  HeadScores expected = scores;
  std::erase_if(expected.user, [&](const UserScore& u) { return !names_role(set, u.name); });
  if (expected.user.size() < scores.user.size()) {
    const Label label = label_all(expected, ablation_delta_loss, options, set);
    if (names_role(set, label_name(label)) || (label == Label::sink() && names_role(set, "first-token")))
      return label;
  }
  return label_all(scores, ablation_delta_loss, options, set);
}

}  // namespace headlab::analysis

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

// A head's label: one of the patterns of kPatterns or a user-defined pattern
// (attend.h); "diffuse" or "mixed" for a head without a clear pattern; "sink"
// for a first-token head whose ablation barely matters.
class Label {
 public:
  Label() = default;  // mixed
  // The built-in pattern called `name`; throws std::invalid_argument for another name.
  static Label pattern(std::string_view name) { return Label(pattern_index(name)); }
  static Label pattern_at(std::size_t index) { return Label(index); }
  // The user-defined pattern called `name` (check_pattern_name's rules).
  static Label user(std::string name) { return Label(kUser, std::move(name)); }
  static Label diffuse() { return Label(kPatternCount); }
  static Label mixed() { return Label(kPatternCount + 1); }
  static Label sink() { return Label(kPatternCount + 2); }

  // A pattern, built-in or user-defined.
  bool is_pattern() const { return value_ < kPatternCount || value_ == kUser; }
  bool is_builtin() const { return value_ < kPatternCount; }
  bool is_user() const { return value_ == kUser; }
  const std::string& user_name() const { return user_; }
  // The table entry of a built-in pattern label; throws std::invalid_argument for the others.
  const Pattern& entry() const;

  // Built-in patterns in table order, diffuse, mixed, sink, then user patterns by name.
  friend auto operator<=>(const Label&, const Label&) = default;

 private:
  static constexpr std::size_t kUser = kPatternCount + 3;
  explicit Label(std::size_t value, std::string user = {}) : value_(value), user_(std::move(user)) {}
  std::size_t value_ = kPatternCount + 1;
  std::string user_;
};

// Every built-in label: the patterns in table order, then diffuse, mixed and sink.
std::vector<Label> all_labels();
// "previous-token", "first-token", ..., "diffuse", "mixed", "sink", or a user pattern's name.
std::string label_name(const Label& label);
// The label's key in heads.json, metrics.jsonl and sweep.json: a built-in
// pattern's pattern_key ("previous_token"), else its name.
std::string label_key(const Label& label);
// A user pattern's colours, picked from a small palette by its name.
std::string user_ansi_colour(const std::string& name);
std::string user_html_colour(const std::string& name);
// Inverse of label_name: a built-in label, or one of `user_patterns`; throws
// std::invalid_argument listing the valid names.
Label label_from_name(const std::string& name, const std::vector<std::string>& user_patterns = {});
// True for the patterns, false for diffuse, mixed and sink.
inline bool is_pattern(const Label& label) { return label.is_pattern(); }

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

// The label options a user sets (`headlab analyze --threshold ...`,
// headlab.analyze(threshold=...)): heads.json's `label_options` key, the
// flag, the member, the flag's help, and its range: a fraction in [0, 1]
// (a score, a margin, a normalized entropy), else a loss change, finite and
// 0 or more. The rest of LabelOptions is the program's own.
struct LabelFlag {
  const char* key;
  const char* flag;
  double LabelOptions::*value;
  const char* help;
  bool fraction;
};
inline constexpr LabelFlag kLabelFlags[] = {
    {"threshold", "--threshold", &LabelOptions::score_threshold, "a label's score must reach this", true},
    {"margin", "--margin", &LabelOptions::margin, "... and beat the runner-up pattern by this", true},
    {"diffuse_entropy", "--diffuse-entropy", &LabelOptions::diffuse_entropy,
     "normalized entropy above which a head is diffuse", true},
    {"sink_delta_loss", "--sink-delta-loss", &LabelOptions::sink_max_delta_loss,
     "a first-token head whose ablation costs less loss than this is a sink", false}};

struct PatternScore {
  Label pattern;
  double score;
};
// The pattern scores that exist, highest first. Scores within kSameScore of
// each other tie, and ties go to user patterns before built-in ones (offset:1
// ranks before previous-token, with which it coincides), user patterns by
// name, built-in ones in table order: never to the order the patterns were given.
std::vector<PatternScore> ranked_patterns(const HeadScores& scores);

// What the labels know of the analyzed set besides a head's own scores
// (docs/head-metrics.md, "Labels").
struct LabelSet {
  // Uniform attention's scores on the set (each query's mass spread evenly over the keys it sees): a pattern
  // labels a head only when it beats its own chance score by the margin, so a pattern that covers most keys
  // (modular-addition's operands, 2 of the 3 keys at '=') does not label an untrained head. nullptr: not
  // measured (a heads.json from before), no such test.
  const HeadScores* chance = nullptr;
  // The expected roles' pattern names. A user pattern no role names is scored only, and never takes from or
  // blocks a label one of these patterns would have without it.
  std::vector<std::string> roles;
};

// The score at which `pattern` can label a head on the set: score_threshold, or its chance score plus the
// margin where that is higher. Emergence steps are taken at it.
double label_threshold(const Label& pattern, const LabelSet& set, const LabelOptions& options);

// A pattern's score by name, built-in or user; absent when it has none (or
// no pattern has that name).
std::optional<double> pattern_score(const HeadScores& scores, const std::string& name);

// The score behind a head's label: its pattern's score when the label is a
// pattern (a user pattern's may not be the highest: see label_head), else the
// highest pattern score (a sink's is first-token's).
double label_score(const HeadScores& scores, const Label& label);

// Two scores closer than this are the same pattern on this batch (e.g.
// modular-addition's first-token and an "operand a" pattern): the label's
// margin is taken over the runner-up that differs by more.
inline constexpr double kSameScore = 1e-9;

// The label of one head: a user pattern that takes it from the built-in
// patterns it nests with (UserScore::nests_with, docs/head-metrics.md "Nested
// patterns"), else the highest pattern clear of the next by the margin; in
// both cases clear of its chance score by the margin too (LabelSet::chance).
// A label an expected role's pattern has without the scored-only user
// patterns stays (LabelSet::roles). ablation_delta_loss = loss with the
// head's gate at 0 minus the loss without ablation; when absent, no head is
// called a sink.
Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options,
                 const LabelSet& set = {});

}  // namespace headlab::analysis

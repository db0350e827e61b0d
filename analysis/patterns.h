// The head patterns: one table entry each (docs/head-metrics.md).
//
// Every place that knows the patterns -- the scores, the labels, heads.json,
// metrics.jsonl, the terminal table, report.html and the sweep summary --
// loops over kPatterns, so adding a pattern is one entry here plus its test
// and its paragraph in docs/head-metrics.md (docs/architecture.md walks
// through it).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace headlab::analysis {

// One head's attention on one example, as doubles: row q holds query q's
// probabilities over the T keys (zero above the diagonal when causal). Only
// the example's real positions 0 .. len-1 are read, as queries and as keys:
// a padded example's padding is no part of any score.
struct HeadMap {
  const double* probs;              // [T, T] row-major
  int64_t len;                      // the example's real length, 1 .. T
  int64_t stride;                   // T
  bool causal;
  std::span<const int32_t> tokens;  // [T], or empty when the tokens are unknown
  // [T], or empty: then every query is judged. Otherwise only the queries
  // with a target (>= 0) are: the positions where the task asks something
  // (docs/head-metrics.md, "Which queries are scored").
  std::span<const int32_t> targets = {};

  double operator()(int64_t q, int64_t k) const { return probs[q * stride + k]; }
  bool judged(int64_t q) const { return targets.empty() || targets[static_cast<std::size_t>(q)] >= 0; }
};

// The keys a pattern reads at query q of one example (only its length,
// causality and tokens are looked at, not the probabilities): fills `keys`,
// ascending, and returns whether the pattern scores q at all. A scored query
// may have no key (it then adds 0 to the mean); an unscored one is left out.
// The score and the nesting of patterns (nesting.h) both come from these keys.
using KeysFn = bool (*)(const HeadMap&, int64_t q, std::vector<int32_t>& keys);

namespace pattern_keys {
// Queries q >= 2, with the one key `key(q)`: the positional patterns skip q = 0
// and 1, whose few keys make every pattern look alike.
template <int64_t (*key)(int64_t)>
bool late_query(const HeadMap&, int64_t q, std::vector<int32_t>& keys) {
  keys.clear();
  if (q < 2) return false;
  keys.push_back(static_cast<int32_t>(key(q)));
  return true;
}

// Queries that have an earlier copy of their token at some j in [first_j,
// q - 3], with the keys j + shift. Nearer copies are left out: their keys j
// and j + 1 would be q's previous token or q itself, and a previous-token or
// self head would score here. Not scored without tokens.
template <int64_t first_j, int64_t shift>
bool earlier_copies(const HeadMap& a, int64_t q, std::vector<int32_t>& keys) {
  keys.clear();
  if (a.tokens.empty() || q < 3) return false;
  for (int64_t j = first_j; j + 2 < q; ++j)
    if (a.tokens[static_cast<std::size_t>(j)] == a.tokens[static_cast<std::size_t>(q)])
      keys.push_back(static_cast<int32_t>(j + shift));
  return !keys.empty();
}
}  // namespace pattern_keys

struct Pattern {
  std::string_view name;         // the label: "previous-token" (its JSON key: name with '_', see pattern_key)
  std::string_view short_name;   // in tables: "prev"
  std::string_view definition;   // one sentence, shown by report.html
  std::string_view ansi_colour;  // SGR code of the label in the terminal
  std::string_view html_colour;  // the label's colour in report.html
  bool can_be_absent = false;    // the score may be absent (e.g. it needs repeated tokens)
  // (With targets, any score may be absent on one example that has no judged
  // query; over a batch it then falls back to the all-query score.)
  bool in_sweep = false;         // sweep.json and the sweep summary report it for every head
  KeysFn keys = nullptr;         // where it looks; its score is the mass there (pattern_score)
};

// The patterns in their ranking order: a tie between two scores goes to the
// earlier entry.
inline constexpr std::array kPatterns = {
    Pattern{.name = "previous-token",
            .short_name = "prev",
            .definition = "mean attention of a query on the token just before it (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;75",
            .html_colour = "#2563eb",
            .in_sweep = true,
            .keys = pattern_keys::late_query<[](int64_t q) { return q - 1; }>},
    Pattern{.name = "first-token",
            .short_name = "first",
            .definition = "mean attention of a query on position 0 (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;215",
            .html_colour = "#ea580c",
            .in_sweep = true,
            .keys = pattern_keys::late_query<[](int64_t) { return int64_t{0}; }>},
    Pattern{.name = "self",
            .short_name = "self",
            .definition = "mean attention of a query on itself (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;114",
            .html_colour = "#16a34a",
            .keys = pattern_keys::late_query<[](int64_t q) { return q; }>},
    Pattern{.name = "induction",
            .short_name = "ind",
            .definition = "attention on the token right after an earlier copy of the current token.",
            .ansi_colour = "38;5;177",
            .html_colour = "#9333ea",
            .can_be_absent = true,
            .keys = pattern_keys::earlier_copies<0, 1>},
    Pattern{.name = "duplicate-token",
            .short_name = "dup",
            .definition = "attention on earlier copies of the current token (copies at position 0 left out: that key is "
                          "the first-token pattern's).",
            .ansi_colour = "38;5;80",
            .html_colour = "#0891b2",
            .can_be_absent = true,
            // From j = 1: a first-token head would otherwise score on every
            // query whose token happens to equal x_0.
            .keys = pattern_keys::earlier_copies<1, 0>},
    // The keys near q that no other positional pattern claims: within
    // distance 2, but not q (self), q - 1 (previous-token) or 0 (first-token),
    // so those heads do not score here (why: docs/head-metrics.md, "Local").
    // Causal: q - 2 for q >= 3.
    Pattern{.name = "local",
            .short_name = "local",
            .definition = "mean attention of a query on the keys within 2 positions of it, other than itself, the "
                          "token just before it and position 0 (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;211",
            .html_colour = "#db2777",
            .keys = [](const HeadMap& a, int64_t q, std::vector<int32_t>& keys) {
              keys.clear();
              if (q < 2) return false;
              const int64_t last = std::min(a.len - 1, a.causal ? q : q + 2);
              for (int64_t k = std::max<int64_t>(1, q - 2); k <= last; ++k)
                if (k != q && k != q - 1) keys.push_back(static_cast<int32_t>(k));
              return true;
            }},
};

inline constexpr std::size_t kPatternCount = kPatterns.size();

// The index of the pattern called `name`. In a constant expression an unknown
// name does not compile; at run time it throws std::invalid_argument.
constexpr std::size_t pattern_index(std::string_view name) {
  for (std::size_t i = 0; i < kPatterns.size(); ++i)
    if (kPatterns[i].name == name) return i;
  throw std::invalid_argument("unknown head pattern '" + std::string(name) + "'");
}

// A pattern's score of one head on one example, in [0, 1]: over the judged
// queries the pattern scores, the mean of the attention on its keys; absent
// when it scores none of them. `buffer` holds the keys of one query.
std::optional<double> pattern_score(const Pattern& pattern, const HeadMap& a, std::vector<int32_t>& buffer);

// Whether a built-in pattern is called `name`.
constexpr bool is_pattern_name(std::string_view name) {
  return std::any_of(kPatterns.begin(), kPatterns.end(), [&](const Pattern& p) { return p.name == name; });
}

// The pattern's key in heads.json, metrics.jsonl and sweep.json: its name
// with '_' for '-' ("previous_token").
std::string pattern_key(const Pattern& pattern);

}  // namespace headlab::analysis

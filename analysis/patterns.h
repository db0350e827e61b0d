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

  // Mean over the judged queries q >= 2 of f(q): the positional scores skip
  // q = 0 and 1, whose few keys make every pattern look alike. Absent when no
  // such query is judged.
  template <class F>
  std::optional<double> mean_over_late_queries(F f) const {
    double total = 0;
    int64_t queries = 0;
    for (int64_t q = 2; q < len; ++q)
      if (judged(q)) {
        total += f(q);
        ++queries;
      }
    if (queries == 0) return std::nullopt;
    return total / static_cast<double>(queries);
  }

  // Over the judged queries q that have an earlier copy of their token at
  // some j in [first_j, q - 3], the mean of sum over those j of f(q, j).
  // Nearer copies are left out: their keys j and j + 1 would be q's previous
  // token or q itself, and a previous-token or self head would score here.
  // Absent when no query has such a copy or the tokens are unknown.
  template <class F>
  std::optional<double> mean_over_earlier_copies(F f, int64_t first_j = 0) const {
    if (tokens.empty()) return std::nullopt;
    double total = 0;
    int64_t queries = 0;
    for (int64_t q = 3; q < len; ++q) {
      if (!judged(q)) continue;
      bool seen = false;
      double sum = 0;
      for (int64_t j = first_j; j + 2 < q; ++j) {
        if (tokens[j] != tokens[q]) continue;
        seen = true;
        sum += f(q, j);
      }
      if (seen) {
        total += sum;
        ++queries;
      }
    }
    if (queries == 0) return std::nullopt;
    return total / static_cast<double>(queries);
  }
};

// A pattern's score of one head on one example, in [0, 1]; absent when the
// example cannot show the pattern (only for patterns with can_be_absent).
using ScoreFn = std::optional<double> (*)(const HeadMap&);

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
  ScoreFn score = nullptr;
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
            .score = [](const HeadMap& a) {
              return a.mean_over_late_queries([&](int64_t q) { return a(q, q - 1); });
            }},
    Pattern{.name = "first-token",
            .short_name = "first",
            .definition = "mean attention of a query on position 0 (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;215",
            .html_colour = "#ea580c",
            .in_sweep = true,
            .score = [](const HeadMap& a) {
              return a.mean_over_late_queries([&](int64_t q) { return a(q, 0); });
            }},
    Pattern{.name = "self",
            .short_name = "self",
            .definition = "mean attention of a query on itself (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;114",
            .html_colour = "#16a34a",
            .score = [](const HeadMap& a) {
              return a.mean_over_late_queries([&](int64_t q) { return a(q, q); });
            }},
    Pattern{.name = "induction",
            .short_name = "ind",
            .definition = "attention on the token right after an earlier copy of the current token.",
            .ansi_colour = "38;5;177",
            .html_colour = "#9333ea",
            .can_be_absent = true,
            .score = [](const HeadMap& a) {
              return a.mean_over_earlier_copies([&](int64_t q, int64_t j) { return a(q, j + 1); });
            }},
    Pattern{.name = "duplicate-token",
            .short_name = "dup",
            .definition = "attention on earlier copies of the current token (copies at position 0 left out: that key is "
                          "the first-token pattern's).",
            .ansi_colour = "38;5;80",
            .html_colour = "#0891b2",
            .can_be_absent = true,
            // From j = 1: a first-token head would otherwise score on every
            // query whose token happens to equal x_0.
            .score = [](const HeadMap& a) {
              return a.mean_over_earlier_copies([&](int64_t q, int64_t j) { return a(q, j); }, 1);
            }},
    // The keys near q that no other positional pattern claims: within
    // distance 2, but not q (self), q - 1 (previous-token) or 0 (first-token),
    // so those heads do not score here (why: docs/head-metrics.md, "Local").
    // Causal: A[q, q-2] for q >= 3.
    Pattern{.name = "local",
            .short_name = "local",
            .definition = "mean attention of a query on the keys within 2 positions of it, other than itself, the "
                          "token just before it and position 0 (queries q ≥ 2 with a target).",
            .ansi_colour = "38;5;211",
            .html_colour = "#db2777",
            .score = [](const HeadMap& a) {
              return a.mean_over_late_queries([&](int64_t q) {
                double sum = 0;
                for (int64_t k = std::max<int64_t>(1, q - 2); k <= std::min(a.len - 1, q + 2); ++k)
                  if (k != q && k != q - 1) sum += a(q, k);
                return sum;
              });
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

// The pattern's key in heads.json, metrics.jsonl and sweep.json: its name
// with '_' for '-' ("previous_token").
std::string pattern_key(const Pattern& pattern);

}  // namespace headlab::analysis

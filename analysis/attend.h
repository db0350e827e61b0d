// User-defined head patterns: where a head should attend, query by query
// (docs/head-metrics.md, "User-defined patterns").
//
// A pattern names, for each query of each example, the keys whose attention
// mass counts -- one key, several (the mass on the set counts), or none (the
// query is not scored). It comes from a data line's "attend" field, from a
// task's expected roles (train/tasks.h) or from `--pattern offset:K` /
// `--pattern position:K`. A head's score for it is, per example, the mean
// over its scored queries of sum_{k in keys(q)} A[q, k], and over a batch the
// mean over the examples that have a scored query (absent when none has).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace headlab::analysis {

struct AttendPattern {
  std::string name;        // its label and its key in heads.json: "after-marker"
  std::string definition;  // one sentence, shown by report.html; may be empty
  int64_t batch = 0, seq_len = 0;
  // keys[b * seq_len + q]: the key positions of query q of example b; empty:
  // the query is not scored.
  std::vector<std::vector<int32_t>> keys;

  const std::vector<int32_t>& at(int64_t b, int64_t q) const { return keys[static_cast<std::size_t>(b * seq_len + q)]; }
  // Whether some query has a key: a set without one could never score the
  // pattern, and its input is refused (docs/head-metrics.md).
  bool keyed() const {
    return std::any_of(keys.begin(), keys.end(), [](const std::vector<int32_t>& k) { return !k.empty(); });
  }
  // An empty pattern of B x T queries (none scored).
  static AttendPattern empty(std::string name, int64_t batch, int64_t seq_len);
};

// Checks a pattern name: non-empty, at most 40 characters of letters, digits,
// '-', '_', ':' and '.', and not a name the analysis already uses (the
// built-in patterns, diffuse, mixed, sink). Throws std::invalid_argument
// naming it and what would fit.
void check_pattern_name(const std::string& name);

// "offset:K" (attention on q - K, K >= 0) or "position:K" (attention on
// position K) over a batch [B, T]: every query with a target (all when
// `targets` is empty) whose key exists (0 <= key < T, and key <= q when
// causal). lengths: [B] real lengths of padded rows, or empty; a padded
// row's queries and keys are its real positions only. Throws
// std::invalid_argument for any other text, naming the forms.
AttendPattern positional_pattern(const std::string& spec, int64_t batch, int64_t seq_len, bool causal,
                                 std::span<const int32_t> targets, std::span<const int32_t> lengths = {});

// Checks that `p` fits a layer's attention [B, h, T, T] (same B and T, keys
// in [0, T), at most q when causal); throws std::invalid_argument.
void check_attend_pattern(const AttendPattern& p, const core::Tensor& attn, bool causal);

// One score per head of the layer whose attention is `attn`.
std::vector<std::optional<double>> attend_scores(const core::Tensor& attn, const AttendPattern& p, bool causal);

// attend_scores over a set read in chunks (each chunk with its rows of the
// pattern): the same sums in the same order as one batch holding them all.
class AttendScoreSums {
 public:
  void add(const core::Tensor& attn, const AttendPattern& p, bool causal);
  std::vector<std::optional<double>> value() const;

 private:
  std::vector<double> total_;     // per head, the sum of the examples' scores
  std::vector<int64_t> examples_;  // per head, the examples with a scored query
};

// Rows [first, first + count) of a pattern, for a slice of the batch.
AttendPattern attend_rows(const AttendPattern& p, int64_t first, int64_t count);

}  // namespace headlab::analysis

namespace headlab::analysis {

// A role a task needs, as the pattern that shows it: a built-in pattern's
// name ("previous-token") or a user pattern's ("next-sorted").
struct ExpectedRole {
  std::string role;     // what the task needs, in words: "operand a"
  std::string pattern;  // the label that fills it
  bool operator==(const ExpectedRole&) const = default;
};

// A user pattern as a run's analysis records it (without the keys).
struct PatternInfo {
  std::string name, definition;
  // The built-in patterns it nests with on the analyzed set (nesting.h).
  std::vector<std::string> nests_with;
  bool operator==(const PatternInfo&) const = default;
};

}  // namespace headlab::analysis

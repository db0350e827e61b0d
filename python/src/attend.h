// The caller's head patterns and expected roles (headlab.analyze's `patterns`
// and `roles`, docs/python.md) as the analysis reads them
// (analysis/attend.h), each checked against the batch: bad input is a
// std::invalid_argument naming the pattern, the sequence, the query and the
// key, never a crash or a silent null score.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/attend.h"

namespace headlab::python {

// The batch the patterns are laid over.
struct PatternBatch {
  int64_t batch = 0, seq_len = 0;
  bool causal = true;
  std::span<const int32_t> targets, lengths;  // lengths: empty when no row is padded
};

// One pattern as the binding receives it: either `spec` ("offset:K",
// "position:K"), or its keys in compressed rows: query (b, q)'s keys are
// keys[offsets[b * T + q] .. offsets[b * T + q + 1]).
struct PatternInput {
  std::string name, definition, spec;
  std::vector<int64_t> offsets;
  std::vector<int32_t> keys;
};

// Checks the name (analysis::check_pattern_name, and no name twice) and every
// key (a real position the query can see), and that some query is scored.
std::vector<analysis::AttendPattern> attend_patterns(const std::vector<PatternInput>& inputs, const PatternBatch& batch);

// Checks that each role names a built-in pattern or one of `patterns`.
std::vector<analysis::ExpectedRole> expected_roles(const std::vector<std::pair<std::string, std::string>>& roles,
                                                   const std::vector<analysis::AttendPattern>& patterns);

// The batch's patterns as boolean masks [B, T, T] (query, key), for
// Model.task_batch.
std::vector<uint8_t> pattern_mask(const analysis::AttendPattern& p);

}  // namespace headlab::python

// Loss and accuracy of a model's predictions: the numbers training logs and
// ablation compares.
#pragma once

#include <cstdint>
#include <span>

#include "analysis/attend.h"
#include "core/tensor.h"
#include "layers/probe.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// Row-major [batch, seq_len] tokens and targets (-1 = no target), viewed,
// with what the task says about them for the head analysis.
struct Examples {
  int64_t batch = 0, seq_len = 0;
  std::span<const int32_t> tokens, targets;
  // Row b's real length (the rest of the row is padding); empty: every row
  // is full. Every forward here masks the padding, and the head analysis
  // scores only real positions.
  std::span<const int32_t> lengths = {};
  // User-defined patterns over these examples (attend.h) and the roles the
  // task expects (built-in or user pattern names).
  std::span<const AttendPattern> attend = {};
  std::span<const ExpectedRole> roles = {};
  // The task defines sources (earlier copies its targets read), so the
  // task-position scores (task_positions.h) mean something.
  bool sources = false;

  // Rows first .. first + count - 1 (without the patterns and roles).
  Examples rows(int64_t first, int64_t count) const;
  // The forward's padding mask: undefined when no row is padded
  // (layers/padding_mask.h).
  core::Tensor padding_mask() const;
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t count = 0;  // positions with a target
};

// The cross-entropy of one row of `classes` logits against class `target`,
// logsumexp(row) - row[target] after subtracting the row's max, and in
// `best` the row's first argmax. float rows take core's vectorized exp, each
// term added in double (within 1e-6 of exact sums); double rows libm's.
double row_loss(const float* row, int64_t classes, int32_t target, int64_t& best);
double row_loss(const double* row, int64_t classes, int32_t target, int64_t& best);

// Mean cross-entropy and accuracy of `logits` [B, T, C] against targets.
EvalResult score_logits(const core::Tensor& logits, std::span<const int32_t> targets);

// score_logits over batches read one after another (an analysis read in
// chunks, analyze_model.h): add() each batch's logits; result() is what
// score_logits of one batch holding them all gives -- the same additions in
// the same order, so bit for bit the same given the same logits.
struct EvalSums {
  double loss = 0;
  int64_t correct = 0, count = 0;
  void add(const core::Tensor& logits, std::span<const int32_t> targets);
  EvalResult result() const;
};

// Loss and accuracy of the model on `examples`, without recording a graph.
// `probe` (optional) gates heads and receives what the forward pass shows,
// as in Transformer::forward.
EvalResult evaluate(const layers::Transformer& model, const Examples& examples, layers::Probe* probe = nullptr);
// The same, added to `sums`.
void add_evaluation(EvalSums& sums, const layers::Transformer& model, const Examples& examples,
                    layers::Probe* probe = nullptr);

}  // namespace headlab::analysis

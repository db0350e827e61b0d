// Head scores on the positions where a task needs a head, beside the
// all-position means of head_metrics.h (docs/head-metrics.md, "Task-position
// scores").
//
// The all-position previous-token score of the layer-0 head of an induction
// circuit is diluted by filler positions where nothing is copied; these
// scores look only where the targets say copying pays:
//   targeted queries  R = { q : target[q] >= 0 }
//   induction         over q in R with an earlier copy (J(q) as in the
//                     induction pattern): sum over j in J(q) of A[q, j+1]
//   previous-token    over the sources S = { j+1 : q in R, j in J(q) } (the
//                     keys an induction head at a targeted query reads):
//                     A[k, k-1] for k in S
// Per example the mean over its queries; over the batch the mean over the
// examples that have any (absent when none has).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "analysis/mean.h"
#include "core/tensor.h"

namespace headlab::analysis {

struct TaskPositionScores {
  std::optional<double> previous_token;  // at the sources S
  std::optional<double> induction;       // at the targeted queries with an earlier copy
};

// One entry per head of the layer whose attention is `attn` [B, h, T, T];
// tokens and targets are row-major [B, T] (empty targets: every score absent).
std::vector<TaskPositionScores> task_position_scores(const core::Tensor& attn, std::span<const int32_t> tokens,
                                                     std::span<const int32_t> targets, bool causal);

// task_position_scores over a set read in chunks: the same sums in the same
// order as one batch holding them all.
class TaskPositionSums {
 public:
  void add(const core::Tensor& attn, std::span<const int32_t> tokens, std::span<const int32_t> targets, bool causal);
  std::vector<TaskPositionScores> value() const;

 private:
  std::vector<Mean> previous_, induction_;  // per head
};

}  // namespace headlab::analysis

// Loss by position and the in-context-learning score (docs/head-metrics.md,
// "Behaviour over training").
//
//   position_loss[t] = mean over the examples with a target at t of the
//                      cross-entropy there (absent where no example has one)
//   icl_score        = mean of position_loss over the last quarter of the
//                      positions that have one, minus the mean over the first
//                      quarter (at least one position each): negative when
//                      later tokens are predicted better than early ones, as
//                      with in-context learning (Olsson et al., 2022, use the
//                      loss of token 500 minus token 50). Absent with fewer
//                      than two positions.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace headlab::analysis {

// logits [B, T, C], targets [B * T] (-1 = none).
std::vector<std::optional<double>> position_loss(const core::Tensor& logits, std::span<const int32_t> targets);

// position_loss over a set read in chunks: the same sums in the same order
// as one batch holding them all.
class PositionLossSums {
 public:
  void add(const core::Tensor& logits, std::span<const int32_t> targets);
  std::vector<std::optional<double>> value() const;

 private:
  std::vector<double> sum_;    // [T]
  std::vector<int64_t> count_;  // [T]
};

std::optional<double> icl_score(const std::vector<std::optional<double>>& position_loss);

}  // namespace headlab::analysis

// Resample ablation of every head over a set read in chunks (analyze_model.h):
// each row gets each head's output on its donor (donors.h: the next row of
// the whole set, cyclically, that is real wherever it is), across chunks as
// within one; a row without a donor is left out of both the ablated loss and
// the base it is compared with, so the delta compares the same positions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "analysis/evaluate.h"
#include "analysis/prefix.h"
#include "layers/transformer.h"

namespace headlab::analysis {

class ResampleSums {
 public:
  // A set of `lengths.size()` rows, or `rows` full ones when `lengths` is
  // empty, analyzed by `model`; each head layer-major.
  ResampleSums(const layers::Transformer& model, int64_t rows, std::span<const int32_t> lengths);

  // The clean outputs [1, T, d] per layer of one row of the set, read on its own.
  using RowOutputs = std::function<std::vector<core::Tensor>(int64_t row)>;
  // Adds rows [first, first + examples.batch) of the set: `logits` and
  // `clean` (head outputs per layer) are their clean forward's; a donor
  // beyond them comes from `beyond`; `prefix` (optional) is their clean
  // pass's residual stream, from which each head's pass starts at its layer
  // (prefix.h). Chunks in order give one batch's sums.
  void add(const Examples& examples, int64_t first, const core::Tensor& logits,
           const std::vector<core::Tensor>& clean, const RowOutputs& beyond, const Prefix& prefix = Prefix());

  // Per head: loss(resampled) - loss over the rows with a donor; absent when no row has one.
  std::vector<std::optional<double>> delta_loss() const;
  int64_t rows() const { return static_cast<int64_t>(donors_.size()); }
  int64_t covered() const { return covered_; }  // rows with a donor

 private:
  const layers::Transformer& model_;
  std::vector<int64_t> donors_;
  int64_t covered_ = 0;
  EvalSums base_;                   // the clean loss over the rows with a donor
  std::vector<EvalSums> resampled_;  // per head
};

}  // namespace headlab::analysis

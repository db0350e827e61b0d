#include "analysis/resample.h"

#include <algorithm>

#include "analysis/ablation.h"
#include "analysis/donors.h"

namespace headlab::analysis {

ResampleSums::ResampleSums(const layers::Transformer& model, int64_t rows, std::span<const int32_t> lengths)
    : model_(model),
      donors_(next_donors(lengths, rows, resample_rule(model.spec().causal))),
      covered_(rows_with_donor(donors_)),
      resampled_(static_cast<std::size_t>(model.num_layers() * model.spec().heads)) {}

void ResampleSums::add(const Examples& examples, int64_t first, const core::Tensor& logits,
                       const std::vector<core::Tensor>& clean, const RowOutputs& beyond, const Prefix& prefix) {
  if (covered_ == 0) return;
  const int64_t n = examples.batch;
  const auto donors = std::span<const int64_t>(donors_).subspan(static_cast<std::size_t>(first),
                                                                static_cast<std::size_t>(n));
  // Row r takes row from[r] of the chunk's outputs followed by those of the
  // donors beyond it.
  const auto [from, outside] = donor_rows(donors, first);
  std::vector<core::Tensor> outputs = clean;
  if (!outside.empty())
    for (std::size_t l = 0; l < clean.size(); ++l) {
      const core::Tensor& c = clean[l];
      outputs[l] = core::Tensor::zeros({n + static_cast<int64_t>(outside.size()), c.size(1), c.size(2)}, c.dtype());
      for (int64_t r = 0; r < n; ++r) outputs[l].select(0, r).copy_(c.select(0, r));
    }
  for (std::size_t k = 0; k < outside.size(); ++k) {
    const std::vector<core::Tensor> row = beyond(outside[k]);
    for (std::size_t l = 0; l < outputs.size(); ++l)
      outputs[l].select(0, n + static_cast<int64_t>(k)).copy_(row.at(l).select(0, 0));
  }
  const std::vector<core::Tensor> replacement = resample_outputs(outputs, from);
  // Only the rows with a donor are scored, in the base as in the ablation.
  const bool all = std::all_of(donors.begin(), donors.end(), [](int64_t d) { return d >= 0; });
  const std::vector<int32_t> targets =
      all ? std::vector<int32_t>{} : targets_with_donor(examples.targets, examples.seq_len, donors);
  Examples scored = examples;
  if (!all) scored.targets = targets;
  base_.add(logits, scored.targets);
  for (std::size_t i = 0; i < resampled_.size(); ++i) add_ablated(resampled_[i], model_, scored, {i}, replacement, prefix);
}

std::vector<std::optional<double>> ResampleSums::delta_loss() const {
  std::vector<std::optional<double>> out(resampled_.size());
  if (covered_ == 0) return out;
  const double base = base_.result().loss;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = resampled_[i].result().loss - base;
  return out;
}

}  // namespace headlab::analysis

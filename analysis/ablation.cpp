#include "analysis/ablation.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/ops.h"

namespace headlab::analysis {
namespace {

// The mean ablation of padded rows: at each position, the mean over the rows
// where it is real (a pad position's output is no output of the sequence);
// a position no row reaches keeps 0, as it only replaces padding.
core::Tensor mean_over_real_rows(const core::Tensor& clean, std::span<const int32_t> lengths) {
  const int64_t B = clean.size(0), T = clean.size(1), D = clean.size(2);
  const core::Tensor c = clean.to(core::DType::f64).contiguous();
  const double* p = c.data<double>();
  std::vector<double> mean(static_cast<std::size_t>(T * D), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    int64_t rows = 0;
    for (int64_t b = 0; b < B; ++b)
      if (t < lengths[static_cast<std::size_t>(b)]) {
        for (int64_t i = 0; i < D; ++i) mean[static_cast<std::size_t>(t * D + i)] += p[(b * T + t) * D + i];
        ++rows;
      }
    for (int64_t i = 0; i < D && rows > 0; ++i) mean[static_cast<std::size_t>(t * D + i)] /= static_cast<double>(rows);
  }
  const core::Tensor row = core::Tensor::from_vector(mean, {T, D}, core::DType::f64).to(clean.dtype());
  core::Tensor out = core::Tensor::zeros(clean.shape(), clean.dtype());
  for (int64_t b = 0; b < B; ++b) out.select(0, b).copy_(row);
  return out;
}

// What an ablated head's output becomes, for the mean and resample kinds:
// out [B, T, d] from the clean outputs [B, T, d] of rows of real lengths
// `lengths` (empty: all full).
core::Tensor replacement_for(const core::Tensor& clean, AblationKind kind, std::span<const int32_t> lengths) {
  const int64_t B = clean.size(0);
  const bool padded =
      std::any_of(lengths.begin(), lengths.end(), [&](int32_t n) { return n < clean.size(1); });
  if (kind == AblationKind::mean && padded) return mean_over_real_rows(clean, lengths);
  if (kind == AblationKind::mean) {
    core::Tensor mean = core::Tensor::zeros({clean.size(1), clean.size(2)}, clean.dtype());
    for (int64_t b = 0; b < B; ++b) mean = core::add(mean, clean.select(0, b));
    mean = core::mul(mean, 1.0 / static_cast<double>(B));
    core::Tensor out = core::Tensor::zeros(clean.shape(), clean.dtype());
    for (int64_t b = 0; b < B; ++b) out.select(0, b).copy_(mean);
    return out;
  }
  core::Tensor out = core::Tensor::zeros(clean.shape(), clean.dtype());
  for (int64_t b = 0; b < B; ++b) out.select(0, b).copy_(clean.select(0, (b + 1) % B));
  return out;
}

// A probe that ablates `heads` (layer-major) the way `kind` says.
layers::Probe ablation_probe(const layers::Transformer& model, const Examples& examples,
                             const std::vector<std::size_t>& heads, AblationKind kind) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  layers::Probe probe(L);
  std::vector<core::Tensor> clean;
  if (kind != AblationKind::zero) clean = record_head_outputs(model, examples);
  for (std::size_t i : heads) {
    if (i >= static_cast<std::size_t>(L * H))
      throw std::invalid_argument("ablate_set: head index " + std::to_string(i) + " is outside the model's " +
                                  std::to_string(L * H) + " heads");
    const auto l = static_cast<std::size_t>(static_cast<int64_t>(i) / H);
    const int64_t h = static_cast<int64_t>(i) % H;
    layers::LayerProbe& layer = probe.layers[l];
    if (kind == AblationKind::zero) {
      if (!layer.gates.defined()) layer.gates = autograd::Variable(core::Tensor::ones({H}, model.dtype()));
      layer.gates.mutable_value().set({h}, 0.0);
    } else {
      if (layer.replace_heads.empty()) {
        layer.replace_heads.assign(static_cast<std::size_t>(H), false);
        layer.replacement = replacement_for(clean[l], kind, examples.lengths);
      }
      layer.replace_heads[static_cast<std::size_t>(h)] = true;
    }
  }
  return probe;
}

}  // namespace

std::vector<core::Tensor> record_head_outputs(const layers::Transformer& model, const Examples& examples) {
  layers::Probe probe(model.num_layers());
  evaluate(model, examples, &probe);
  std::vector<core::Tensor> out;
  for (const layers::LayerProbe& layer : probe.layers) out.push_back(layer.head_outputs);
  return out;
}

Ablation ablate_set(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                    const std::vector<std::size_t>& heads, AblationKind kind) {
  layers::Probe probe = ablation_probe(model, examples, heads, kind);
  const EvalResult ablated = evaluate(model, examples, &probe);
  return {ablated.loss - base.loss, ablated.accuracy - base.accuracy};
}

std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                                   AblationKind kind) {
  const auto n = static_cast<std::size_t>(model.num_layers() * model.spec().heads);
  std::vector<Ablation> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(ablate_set(model, examples, base, {i}, kind));
  return out;
}

}  // namespace headlab::analysis

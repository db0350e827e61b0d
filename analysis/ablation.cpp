#include "analysis/ablation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/ops.h"

namespace headlab::analysis {
namespace {

// The replacement of `kind` on `examples` alone (empty for zero ablation).
std::vector<core::Tensor> replacement_for(const layers::Transformer& model, const Examples& examples,
                                          AblationKind kind) {
  if (kind == AblationKind::zero) return {};
  const std::vector<core::Tensor> clean = record_head_outputs(model, examples);
  if (kind == AblationKind::resample) return resample_outputs(clean);
  MeanOutputSums mean;
  mean.add(clean, examples.lengths);
  return mean.replacement(examples.batch);
}

// `rows` copies of `row` [T, d]: [rows, T, d].
core::Tensor repeated(const core::Tensor& row, int64_t rows) {
  core::Tensor out = core::Tensor::zeros({rows, row.size(0), row.size(1)}, row.dtype());
  for (int64_t b = 0; b < rows; ++b) out.select(0, b).copy_(row);
  return out;
}

}  // namespace

std::vector<core::Tensor> record_head_outputs(const layers::Transformer& model, const Examples& examples) {
  layers::Probe probe(model.num_layers());
  evaluate(model, examples, &probe);
  std::vector<core::Tensor> out;
  for (const layers::LayerProbe& layer : probe.layers) out.push_back(layer.head_outputs);
  return out;
}

void add_ablated(EvalSums& sums, const layers::Transformer& model, const Examples& examples,
                 const std::vector<std::size_t>& heads, const std::vector<core::Tensor>& replacement) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  layers::Probe probe(L);
  for (std::size_t i : heads) {
    if (i >= static_cast<std::size_t>(L * H))
      throw std::invalid_argument("ablate_set: head index " + std::to_string(i) + " is outside the model's " +
                                  std::to_string(L * H) + " heads");
    const auto l = static_cast<std::size_t>(static_cast<int64_t>(i) / H);
    const int64_t h = static_cast<int64_t>(i) % H;
    layers::LayerProbe& layer = probe.layers[l];
    if (replacement.empty()) {
      if (!layer.gates.defined()) layer.gates = autograd::Variable(core::Tensor::ones({H}, model.dtype()));
      layer.gates.mutable_value().set({h}, 0.0);
    } else {
      if (layer.replace_heads.empty()) {
        layer.replace_heads.assign(static_cast<std::size_t>(H), false);
        layer.replacement = replacement[l];
      }
      layer.replace_heads[static_cast<std::size_t>(h)] = true;
    }
  }
  add_evaluation(sums, model, examples, &probe);
}

Ablation ablate_set(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                    const std::vector<std::size_t>& heads, AblationKind kind) {
  EvalSums sums;
  add_ablated(sums, model, examples, heads, replacement_for(model, examples, kind));
  const EvalResult ablated = sums.result();
  return {ablated.loss - base.loss, ablated.accuracy - base.accuracy};
}

std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                                   AblationKind kind) {
  const auto n = static_cast<std::size_t>(model.num_layers() * model.spec().heads);
  const std::vector<core::Tensor> replacement = replacement_for(model, examples, kind);
  std::vector<Ablation> out;
  for (std::size_t i = 0; i < n; ++i) {
    EvalSums sums;
    add_ablated(sums, model, examples, {i}, replacement);
    const EvalResult ablated = sums.result();
    out.push_back({ablated.loss - base.loss, ablated.accuracy - base.accuracy});
  }
  return out;
}

void MeanOutputSums::add(const std::vector<core::Tensor>& clean, std::span<const int32_t> lengths) {
  if (layers_.empty()) layers_.resize(clean.size());
  if (clean.size() != layers_.size())
    throw std::invalid_argument("mean ablation: outputs of " + std::to_string(clean.size()) + " layers after " +
                                std::to_string(layers_.size()));
  const int64_t B = clean.at(0).size(0), T = clean[0].size(1);
  for (std::size_t l = 0; l < clean.size(); ++l) {
    Layer& layer = layers_[l];
    const int64_t D = clean[l].size(2);
    if (!layer.sum.defined()) {
      layer.sum = core::Tensor::zeros({T, D}, clean[l].dtype());
      layer.real_sum.assign(static_cast<std::size_t>(T * D), 0.0);
      layer.real_rows.assign(static_cast<std::size_t>(T), 0);
    }
    // Every row, in the outputs' dtype: mean ablation's sum over a batch of full rows.
    for (int64_t b = 0; b < B; ++b) layer.sum = core::add(layer.sum, clean[l].select(0, b));
    // The real positions, in doubles: its sum over padded rows.
    const core::Tensor c = clean[l].to(core::DType::f64).contiguous();
    const double* p = c.data<double>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < B; ++b)
        if (lengths.empty() || t < lengths[static_cast<std::size_t>(b)]) {
          for (int64_t i = 0; i < D; ++i) layer.real_sum[static_cast<std::size_t>(t * D + i)] += p[(b * T + t) * D + i];
          ++layer.real_rows[static_cast<std::size_t>(t)];
        }
  }
  rows_ += B;
  padded_ = padded_ || std::any_of(lengths.begin(), lengths.end(), [&](int32_t n) { return n < T; });
}

std::vector<core::Tensor> MeanOutputSums::replacement(int64_t rows) const {
  std::vector<core::Tensor> out;
  for (const Layer& layer : layers_) {
    if (!padded_) {
      out.push_back(repeated(core::mul(layer.sum, 1.0 / static_cast<double>(rows_)), rows));
      continue;
    }
    // Padded rows: at each position the mean over the rows where it is real
    // (a pad position's output is no output of the sequence); a position no
    // row reaches keeps 0, as it only replaces padding.
    const int64_t T = layer.sum.size(0), D = layer.sum.size(1);
    std::vector<double> mean = layer.real_sum;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = layer.real_rows[static_cast<std::size_t>(t)];
      for (int64_t i = 0; i < D && n > 0; ++i) mean[static_cast<std::size_t>(t * D + i)] /= static_cast<double>(n);
    }
    out.push_back(repeated(core::Tensor::from_vector(mean, {T, D}, core::DType::f64).to(layer.sum.dtype()), rows));
  }
  return out;
}

std::vector<core::Tensor> resample_outputs(const std::vector<core::Tensor>& clean, const std::vector<core::Tensor>& next) {
  std::vector<core::Tensor> out;
  for (std::size_t l = 0; l < clean.size(); ++l) {
    const int64_t B = clean[l].size(0);
    core::Tensor r = core::Tensor::zeros(clean[l].shape(), clean[l].dtype());
    for (int64_t b = 0; b + 1 < B; ++b) r.select(0, b).copy_(clean[l].select(0, b + 1));
    r.select(0, B - 1).copy_(next.empty() ? clean[l].select(0, 0) : next.at(l).select(0, 0));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace headlab::analysis

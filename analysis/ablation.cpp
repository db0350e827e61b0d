#include "analysis/ablation.h"

#include <stdexcept>
#include <string>

#include "core/ops.h"

namespace headlab::analysis {
namespace {

// What an ablated head's output becomes, for the mean and resample kinds:
// out [B, T, d] from the clean outputs [B, T, d].
core::Tensor replacement_for(const core::Tensor& clean, AblationKind kind) {
  const int64_t B = clean.size(0);
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
        layer.replacement = replacement_for(clean[l], kind);
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

#include "analysis/patching.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/prefix.h"

namespace headlab::analysis {

Patching patch_heads(const layers::Transformer& model, const Examples& clean, const Corruption& corruption) {
  PatchingSums sums;
  sums.add(model, clean, corruption);
  return sums.value();
}

void PatchingSums::add(const layers::Transformer& model, const Examples& clean, const Corruption& corruption) {
  layers::Probe probe(model.num_layers(), layers::ProbeOutputs::only_head_outputs());
  const core::Tensor logits = Prefix().logits(model, clean, probe, 0);
  std::vector<core::Tensor> outputs;
  for (const layers::LayerProbe& layer : probe.layers) outputs.push_back(layer.head_outputs);
  add(model, clean, corruption, logits, outputs);
}

void PatchingSums::add(const layers::Transformer& model, const Examples& clean, const Corruption& corruption,
                       const core::Tensor& clean_logits, const std::vector<core::Tensor>& clean_outputs) {
  if (corruption.tokens.size() != clean.tokens.size())
    throw std::invalid_argument("patch_heads: " + std::to_string(corruption.tokens.size()) +
                                " corrupted tokens for a clean batch of " + std::to_string(clean.tokens.size()));
  const int64_t L = model.num_layers(), H = model.spec().heads;
  if (!corruption.gates.empty() && static_cast<int64_t>(corruption.gates.size()) != L)
    throw std::invalid_argument("patch_heads: corruption gates for " + std::to_string(corruption.gates.size()) +
                                " layers, the model has " + std::to_string(L));
  // The clean rows' lengths: the positions scored are the clean rows'.
  const Examples corrupted{clean.batch, clean.seq_len, corruption.tokens, clean.targets, clean.lengths};
  const bool gated = std::any_of(corruption.gates.begin(), corruption.gates.end(),
                                 [](const core::Tensor& g) { return g.defined(); });
  for (int64_t b = 0; b < clean.batch; ++b) {
    const auto row = static_cast<std::size_t>(b * clean.seq_len);
    const auto n = static_cast<std::size_t>(clean.lengths.empty() ? clean.seq_len : clean.lengths[static_cast<std::size_t>(b)]);
    corrupted_rows_ += gated || !std::equal(clean.tokens.begin() + static_cast<std::ptrdiff_t>(row),
                                            clean.tokens.begin() + static_cast<std::ptrdiff_t>(row + n),
                                            corruption.tokens.begin() + static_cast<std::ptrdiff_t>(row));
  }
  rows_ += clean.batch;
  auto corrupted_probe = [&](layers::ProbeOutputs keep) {
    layers::Probe probe(L, keep);
    for (std::size_t l = 0; l < corruption.gates.size(); ++l)
      if (corruption.gates[l].defined()) probe.layers[l].gates = autograd::Variable(corruption.gates[l].clone());
    return probe;
  };
  if (static_cast<int64_t>(clean_outputs.size()) != L)
    throw std::invalid_argument("patch_heads: clean head outputs of " + std::to_string(clean_outputs.size()) +
                                " layers, the model has " + std::to_string(L));
  clean_.add(clean_logits, clean.targets);
  // Its residuals are the patched passes' prefix; they read only their logits.
  layers::Probe plain = corrupted_probe(layers::ProbeOutputs::only_residual());
  corrupted_.add(Prefix().logits(model, corrupted, plain, 0), corrupted.targets);
  // A head of layer l patched changes the corrupted pass from layer l on.
  const Prefix before(plain);
  patched_.resize(static_cast<std::size_t>(L * H));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      layers::Probe probe = corrupted_probe(layers::ProbeOutputs::none());
      layers::LayerProbe& layer = probe.layers[static_cast<std::size_t>(l)];
      layer.replace_heads.assign(static_cast<std::size_t>(H), false);
      layer.replace_heads[static_cast<std::size_t>(h)] = true;
      layer.replacement = clean_outputs[static_cast<std::size_t>(l)];
      patched_[static_cast<std::size_t>(l * H + h)].add(before.logits(model, corrupted, probe, l), corrupted.targets);
    }
}

Patching PatchingSums::value() const {
  Patching p;
  p.clean_loss = clean_.result().loss;
  p.corrupted_loss = corrupted_.result().loss;
  p.rows = rows_;
  p.corrupted_rows = corrupted_rows_;
  const double gap = p.corrupted_loss - p.clean_loss;
  for (const EvalSums& patched : patched_) {
    const double loss = patched.result().loss;
    p.patched_loss.push_back(loss);
    p.restored.push_back(std::abs(gap) < 1e-9 ? std::nullopt : std::optional<double>((p.corrupted_loss - loss) / gap));
  }
  return p;
}

}  // namespace headlab::analysis

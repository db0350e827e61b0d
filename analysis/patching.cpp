#include "analysis/patching.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "analysis/ablation.h"

namespace headlab::analysis {

Patching patch_heads(const layers::Transformer& model, const Examples& clean, const Corruption& corruption) {
  if (corruption.tokens.size() != clean.tokens.size())
    throw std::invalid_argument("patch_heads: " + std::to_string(corruption.tokens.size()) +
                                " corrupted tokens for a clean batch of " + std::to_string(clean.tokens.size()));
  const int64_t L = model.num_layers(), H = model.spec().heads;
  if (!corruption.gates.empty() && static_cast<int64_t>(corruption.gates.size()) != L)
    throw std::invalid_argument("patch_heads: corruption gates for " + std::to_string(corruption.gates.size()) +
                                " layers, the model has " + std::to_string(L));
  // The clean rows' lengths: the positions scored are the clean rows'.
  const Examples corrupted{clean.batch, clean.seq_len, corruption.tokens, clean.targets, clean.lengths};
  auto corrupted_probe = [&] {
    layers::Probe probe(L);
    for (std::size_t l = 0; l < corruption.gates.size(); ++l)
      if (corruption.gates[l].defined()) probe.layers[l].gates = autograd::Variable(corruption.gates[l].clone());
    return probe;
  };
  const std::vector<core::Tensor> outputs = record_head_outputs(model, clean);
  Patching p;
  p.clean_loss = evaluate(model, clean).loss;
  layers::Probe plain = corrupted_probe();
  p.corrupted_loss = evaluate(model, corrupted, &plain).loss;
  const double gap = p.corrupted_loss - p.clean_loss;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      layers::Probe probe = corrupted_probe();
      layers::LayerProbe& layer = probe.layers[static_cast<std::size_t>(l)];
      layer.replace_heads.assign(static_cast<std::size_t>(H), false);
      layer.replace_heads[static_cast<std::size_t>(h)] = true;
      layer.replacement = outputs[static_cast<std::size_t>(l)];
      const double loss = evaluate(model, corrupted, &probe).loss;
      p.patched_loss.push_back(loss);
      p.restored.push_back(std::abs(gap) < 1e-9 ? std::nullopt
                                                : std::optional<double>((p.corrupted_loss - loss) / gap));
    }
  return p;
}

}  // namespace headlab::analysis

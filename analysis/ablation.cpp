#include "analysis/ablation.h"

namespace headlab::analysis {

std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  std::vector<Ablation> out;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      layers::Probe probe(L);
      core::Tensor gates = core::Tensor::ones({H}, model.dtype());
      gates.set({h}, 0.0);
      probe.layers[static_cast<std::size_t>(l)].gates = autograd::Variable(gates);
      const EvalResult ablated = evaluate(model, examples, &probe);
      out.push_back({ablated.loss - base.loss, ablated.accuracy - base.accuracy});
    }
  return out;
}

}  // namespace headlab::analysis

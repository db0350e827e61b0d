#include "analysis/importance.h"

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"

namespace headlab::analysis {

std::vector<double> gate_importance(const layers::Transformer& model, const Examples& examples, int64_t max_examples) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  std::vector<double> total(static_cast<std::size_t>(L * H), 0.0);
  int64_t used = 0;
  for (int64_t b = 0; b < std::min(max_examples, examples.batch); ++b) {
    const Examples one = examples.rows(b, 1);
    if (std::none_of(one.targets.begin(), one.targets.end(), [](int32_t t) { return t >= 0; })) continue;
    layers::Probe probe(L);
    std::vector<autograd::Variable> gates;
    for (auto& layer : probe.layers) {
      layer.gates = autograd::Variable(core::Tensor::ones({H}, model.dtype()), /*requires_grad=*/true);
      gates.push_back(layer.gates);
    }
    autograd::GradOnlyFor only_gates(gates);
    const auto logits = model.forward(one.tokens, 1, one.seq_len, nullptr, &probe);
    autograd::cross_entropy(logits, one.targets).backward();
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        total[static_cast<std::size_t>(l * H + h)] += std::abs(gates[static_cast<std::size_t>(l)].grad().at({h}));
    ++used;
  }
  for (double& v : total) v /= static_cast<double>(std::max<int64_t>(used, 1));
  return total;
}

}  // namespace headlab::analysis

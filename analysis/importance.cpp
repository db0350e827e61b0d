#include "analysis/importance.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"

namespace headlab::analysis {
namespace {

using autograd::Variable;

// Mean over the positions with a target of z_y - log sum_{c != y} exp z_c,
// for logits [1, T, C].
Variable mean_margin(const Variable& logits, std::span<const int32_t> targets) {
  const core::Shape& s = logits.shape();
  const int64_t T = s[1], C = s[2];
  if (C < 2) throw std::invalid_argument("margin importance needs at least 2 classes, got " + std::to_string(C));
  core::Tensor onehot = core::Tensor::zeros(s, logits.dtype()), weight = core::Tensor::zeros({1, T}, logits.dtype());
  int64_t count = 0;
  for (int64_t p = 0; p < T; ++p) {
    const int32_t y = targets[static_cast<std::size_t>(p)];
    if (y < 0) continue;
    onehot.set({0, p, y}, 1.0);
    weight.set({0, p}, 1.0);
    ++count;
  }
  const Variable correct = autograd::sum(logits * Variable(onehot), {2});               // [1, T]
  const Variable others = autograd::masked_fill(logits, onehot, -1e30);                 // the target left out
  const Variable top = autograd::max(others, 2, /*keepdim=*/true);                      // [1, T, 1]
  const Variable lse = autograd::reshape(top, {1, T}) +
                       autograd::log(autograd::sum(autograd::exp(others - top), {2}));  // [1, T]
  return autograd::sum((correct - lse) * Variable(weight)) * (1.0 / static_cast<double>(std::max<int64_t>(count, 1)));
}

}  // namespace

std::vector<double> gate_importance(const layers::Transformer& model, const Examples& examples, int64_t max_examples,
                                    ImportanceObjective objective) {
  ImportanceSums sums(objective);
  sums.add(model, examples.rows(0, std::clamp<int64_t>(max_examples, 0, examples.batch)));
  return sums.value();
}

void ImportanceSums::add(const layers::Transformer& model, const Examples& examples) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  if (total_.empty()) total_.assign(static_cast<std::size_t>(L * H), 0.0);
  for (int64_t b = 0; b < examples.batch; ++b) {
    const Examples one = examples.rows(b, 1);
    if (std::none_of(one.targets.begin(), one.targets.end(), [](int32_t t) { return t >= 0; })) continue;
    // Read for the gates' gradient alone.
    layers::Probe probe(L, layers::ProbeOutputs::none());
    std::vector<Variable> gates;
    for (auto& layer : probe.layers) {
      layer.gates = Variable(core::Tensor::ones({H}, model.dtype()), /*requires_grad=*/true);
      gates.push_back(layer.gates);
    }
    autograd::GradOnlyFor only_gates(gates);
    const core::Tensor mask = one.padding_mask();
    const auto logits = model.forward(one.tokens, 1, one.seq_len, &mask, &probe);
    if (objective_ == ImportanceObjective::loss)
      autograd::cross_entropy(logits, one.targets).backward();
    else
      mean_margin(logits, one.targets).backward();
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        total_[static_cast<std::size_t>(l * H + h)] += std::abs(gates[static_cast<std::size_t>(l)].grad().at({h}));
    ++used_;
  }
}

std::vector<double> ImportanceSums::value() const {
  std::vector<double> out = total_;
  for (double& v : out) v /= static_cast<double>(std::max<int64_t>(used_, 1));
  return out;
}

std::vector<double> normalize_per_layer(const std::vector<double>& values, int64_t heads) {
  if (heads < 1 || values.size() % static_cast<std::size_t>(heads) != 0)
    throw std::invalid_argument("normalize_per_layer: " + std::to_string(values.size()) + " values are not whole layers of " +
                                std::to_string(heads) + " heads");
  std::vector<double> out = values;
  for (std::size_t first = 0; first < out.size(); first += static_cast<std::size_t>(heads)) {
    double sq = 0;
    for (std::size_t i = first; i < first + static_cast<std::size_t>(heads); ++i) sq += out[i] * out[i];
    if (sq > 0)
      for (std::size_t i = first; i < first + static_cast<std::size_t>(heads); ++i) out[i] /= std::sqrt(sq);
  }
  return out;
}

}  // namespace headlab::analysis

#include "analysis/pruning.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/random.h"

namespace headlab::analysis {
namespace {

// Loss and accuracy with the first 0, 1, ..., N heads of `order` removed.
std::vector<EvalResult> curve(const layers::Transformer& model, const Examples& examples,
                              const std::vector<int64_t>& order) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  std::vector<core::Tensor> gates(static_cast<std::size_t>(L));
  for (core::Tensor& g : gates) g = core::Tensor::ones({H}, model.dtype());
  std::vector<EvalResult> out;
  for (std::size_t removed = 0;; ++removed) {
    layers::Probe probe(L);
    for (int64_t l = 0; l < L; ++l)
      probe.layers[static_cast<std::size_t>(l)].gates = autograd::Variable(gates[static_cast<std::size_t>(l)].clone());
    out.push_back(evaluate(model, examples, &probe));
    if (removed == order.size()) break;
    const int64_t head = order[removed];
    gates[static_cast<std::size_t>(head / H)].set({head % H}, 0.0);
  }
  return out;
}

}  // namespace

PruningCurve pruning_curve(const layers::Transformer& model, const Examples& examples,
                           const std::vector<double>& importance, int64_t random_orders, uint64_t seed) {
  const int64_t n = model.num_layers() * model.spec().heads;
  if (static_cast<int64_t>(importance.size()) != n)
    throw std::invalid_argument("pruning_curve: " + std::to_string(importance.size()) + " importances for " +
                                std::to_string(n) + " heads");
  if (random_orders < 0) throw std::invalid_argument("pruning_curve: random_orders must be 0 or more");
  PruningCurve c;
  c.order.resize(static_cast<std::size_t>(n));
  std::iota(c.order.begin(), c.order.end(), int64_t{0});
  std::stable_sort(c.order.begin(), c.order.end(), [&](int64_t a, int64_t b) {
    return importance[static_cast<std::size_t>(a)] < importance[static_cast<std::size_t>(b)];
  });
  for (const EvalResult& r : curve(model, examples, c.order)) {
    c.loss.push_back(r.loss);
    c.accuracy.push_back(r.accuracy);
  }
  c.random_orders = random_orders;
  c.random_loss.assign(c.loss.size(), 0.0);
  c.random_accuracy.assign(c.loss.size(), 0.0);
  core::Generator gen(seed);
  for (int64_t r = 0; r < random_orders; ++r) {
    std::vector<int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
      std::swap(order[static_cast<std::size_t>(i)],
                order[static_cast<std::size_t>(gen.next_u64() % static_cast<uint64_t>(i + 1))]);
    const std::vector<EvalResult> points = curve(model, examples, order);
    for (std::size_t i = 0; i < points.size(); ++i) {
      c.random_loss[i] += points[i].loss / static_cast<double>(random_orders);
      c.random_accuracy[i] += points[i].accuracy / static_cast<double>(random_orders);
    }
  }
  if (random_orders == 0) {
    c.random_loss.clear();
    c.random_accuracy.clear();
  }
  return c;
}

}  // namespace headlab::analysis

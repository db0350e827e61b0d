#include "analysis/pruning.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>

#include "core/random.h"

namespace headlab::analysis {
namespace {

// Adds the loss and accuracy with the first 0, 1, ..., N heads of `order`
// removed to points[0 .. N]: 0 is the unablated pass (all-ones gates change
// no bit); each next point changes only the gates of the layer of the head
// it removes, so it runs from that layer on, the blocks before as the point
// before left them. The last point, every head removed, is one pass whatever
// the order (every gate 0, each block's input the one a pass from the
// embedding gives): with `with_last`, its logits are also added to each of
// `same_last`'s last points; without, the last point is left to the order
// that has it in its `same_last`.
void add_curve(std::vector<EvalSums>& points, const layers::Transformer& model, const Examples& examples,
               const std::vector<int64_t>& order, const core::Tensor& clean_logits, const Prefix& clean,
               bool with_last, std::span<std::vector<EvalSums>> same_last) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  std::vector<core::Tensor> gates(static_cast<std::size_t>(L));
  for (core::Tensor& g : gates) g = core::Tensor::ones({H}, model.dtype());
  points[0].add(clean_logits, examples.targets);
  Prefix prefix = clean;
  const std::size_t last = with_last ? order.size() : order.size() - 1;
  for (std::size_t removed = 1; removed <= last; ++removed) {
    const int64_t head = order[removed - 1], layer = head / H;
    gates[static_cast<std::size_t>(layer)].set({head % H}, 0.0);
    // Its residuals are the next point's prefix; nothing else is read.
    layers::Probe probe(L, layers::ProbeOutputs::only_residual());
    for (int64_t l = 0; l < L; ++l)
      probe.layers[static_cast<std::size_t>(l)].gates = autograd::Variable(gates[static_cast<std::size_t>(l)].clone());
    const core::Tensor logits = prefix.logits(model, examples, probe, layer);
    points[removed].add(logits, examples.targets);
    if (removed == order.size()) {
      for (std::vector<EvalSums>& other : same_last) other[removed].add(logits, examples.targets);
    } else {
      prefix.advance(probe, layer);
    }
  }
}

}  // namespace

PruningCurve pruning_curve(const layers::Transformer& model, const Examples& examples,
                           const std::vector<double>& importance, int64_t random_orders, uint64_t seed) {
  PruningSums sums(model.num_layers() * model.spec().heads, importance, random_orders, seed);
  layers::Probe clean(model.num_layers(), layers::ProbeOutputs::only_residual());
  const core::Tensor logits = Prefix().logits(model, examples, clean, 0);
  sums.add(model, examples, logits, Prefix(clean));
  return sums.value();
}

PruningSums::PruningSums(int64_t heads, const std::vector<double>& importance, int64_t random_orders, uint64_t seed) {
  const int64_t n = heads;
  if (static_cast<int64_t>(importance.size()) != n)
    throw std::invalid_argument("pruning_curve: " + std::to_string(importance.size()) + " importances for " +
                                std::to_string(n) + " heads");
  if (random_orders < 0) throw std::invalid_argument("pruning_curve: random_orders must be 0 or more");
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return importance[static_cast<std::size_t>(a)] < importance[static_cast<std::size_t>(b)];
  });
  orders_.push_back(std::move(order));
  core::Generator gen(seed);
  for (int64_t r = 0; r < random_orders; ++r) {
    std::vector<int64_t> random(static_cast<std::size_t>(n));
    std::iota(random.begin(), random.end(), int64_t{0});
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
      std::swap(random[static_cast<std::size_t>(i)],
                random[static_cast<std::size_t>(gen.next_u64() % static_cast<uint64_t>(i + 1))]);
    orders_.push_back(std::move(random));
  }
  points_.resize(orders_.size());
}

void PruningSums::add(const layers::Transformer& model, const Examples& examples, const core::Tensor& clean_logits,
                      const Prefix& clean) {
  if (static_cast<int64_t>(orders_[0].size()) != model.num_layers() * model.spec().heads)
    throw std::invalid_argument("pruning_curve: " + std::to_string(orders_[0].size()) + " importances for " +
                                std::to_string(model.num_layers() * model.spec().heads) + " heads");
  for (std::vector<EvalSums>& points : points_) points.resize(orders_[0].size() + 1);
  const std::span<std::vector<EvalSums>> random(points_.begin() + 1, points_.end());
  for (std::size_t o = 0; o < orders_.size(); ++o)
    add_curve(points_[o], model, examples, orders_[o], clean_logits, clean, o == 0, o == 0 ? random : decltype(random){});
}

PruningCurve PruningSums::value() const {
  PruningCurve c;
  c.order = orders_[0];
  for (const EvalSums& point : points_[0]) {
    const EvalResult r = point.result();
    c.loss.push_back(r.loss);
    c.accuracy.push_back(r.accuracy);
  }
  const auto random_orders = static_cast<int64_t>(orders_.size()) - 1;
  c.random_orders = random_orders;
  if (random_orders == 0) return c;
  c.random_loss.assign(c.loss.size(), 0.0);
  c.random_accuracy.assign(c.loss.size(), 0.0);
  for (std::size_t o = 1; o < points_.size(); ++o)
    for (std::size_t i = 0; i < points_[o].size(); ++i) {
      const EvalResult r = points_[o][i].result();
      c.random_loss[i] += r.loss / static_cast<double>(random_orders);
      c.random_accuracy[i] += r.accuracy / static_cast<double>(random_orders);
    }
  return c;
}

}  // namespace headlab::analysis

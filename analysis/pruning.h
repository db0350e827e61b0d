// The pruning curve (Michel et al. 2019): accuracy and loss as heads are
// zero-ablated one after another, least important first, against random
// orders. Every head is removed through its probe gate; the model is never
// changed.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/circuit_records.h"
#include "analysis/evaluate.h"
#include "analysis/prefix.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// `importance`: one value per head, layer-major; heads are removed in
// ascending order of it (ties: the lower index first). The random curves are
// the mean over `random_orders` uniform permutations drawn from a generator
// seeded with `seed`.
PruningCurve pruning_curve(const layers::Transformer& model, const Examples& examples,
                           const std::vector<double>& importance, int64_t random_orders = 5, uint64_t seed = 0);

// pruning_curve over a set read in chunks: the orders are drawn once, add()
// evaluates each chunk at every point of every order, and value() is what
// pruning_curve of one batch holding every chunk gives -- the same sums in
// the same order. Arguments as pruning_curve's (the model's head count).
class PruningSums {
 public:
  PruningSums(int64_t heads, const std::vector<double>& importance, int64_t random_orders = 5, uint64_t seed = 0);
  // `clean_logits` and `clean`: the chunk's unablated pass, its logits and
  // residual stream (prefix.h). Its loss is every curve's first point; each
  // next point, one more head removed, starts at that head's layer from the
  // point before's residuals, so an order costs L(L+1)/2 blocks per head of
  // a layer rather than L per head (the same bits as passes from the embedding).
  void add(const layers::Transformer& model, const Examples& examples, const core::Tensor& clean_logits,
           const Prefix& clean);
  PruningCurve value() const;

 private:
  std::vector<std::vector<int64_t>> orders_;  // the importance order, then the random ones
  std::vector<std::vector<EvalSums>> points_;  // per order, per number of heads removed
};

}  // namespace headlab::analysis

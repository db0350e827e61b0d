// Gradient importance of each head: the mean over examples of |dO/d gate|
// (Michel et al. 2019), the first-order estimate of what ablating it costs,
// for an objective O: the loss, as Michel et al., or the correct class's
// logit margin, which does not saturate.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

enum class ImportanceObjective {
  // The example's mean cross-entropy. Its gradient is (p - onehot) times the
  // logits' gradient, so it vanishes once the model is confident: a head the
  // model cannot do without scores ~0 on a solved task.
  loss,
  // The example's mean logit margin of the target, m = z_y - log sum_{c != y} exp z_c
  // (the loss is softplus(-m), i.e. the same quantity before the saturating
  // sigmoid): its gradient stays as large as the head's effect on the logits.
  margin,
};

// One entry per head, layer-major, over the first `max_examples` examples
// that have a target (one backward each). The gates are the only leaves that
// receive a gradient (autograd::GradOnlyFor): the model's parameters and
// their gradients are left alone, so this is safe mid-training.
std::vector<double> gate_importance(const layers::Transformer& model, const Examples& examples, int64_t max_examples,
                                    ImportanceObjective objective = ImportanceObjective::loss);

// gate_importance over a set read in chunks: add() the rows that count (the
// first `max_examples` of the set); the same sums in the same order as one
// batch holding them all.
class ImportanceSums {
 public:
  explicit ImportanceSums(ImportanceObjective objective = ImportanceObjective::loss) : objective_(objective) {}
  void add(const layers::Transformer& model, const Examples& examples);
  std::vector<double> value() const;

 private:
  ImportanceObjective objective_;
  std::vector<double> total_;  // per head, sum over examples of |dO/d gate|
  int64_t used_ = 0;           // examples with a target
};

// Michel et al.'s per-layer normalization: each layer's importances divided by
// their Euclidean norm (a layer of zeros stays zero). `values` is layer-major
// with `heads` per layer.
std::vector<double> normalize_per_layer(const std::vector<double>& values, int64_t heads);

}  // namespace headlab::analysis

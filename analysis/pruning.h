// The pruning curve (Michel et al. 2019): accuracy and loss as heads are
// zero-ablated one after another, least important first, against random
// orders. Every head is removed through its probe gate; the model is never
// changed.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/circuit_records.h"
#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// `importance`: one value per head, layer-major; heads are removed in
// ascending order of it (ties: the lower index first). The random curves are
// the mean over `random_orders` uniform permutations drawn from a generator
// seeded with `seed`.
PruningCurve pruning_curve(const layers::Transformer& model, const Examples& examples,
                           const std::vector<double>& importance, int64_t random_orders = 5, uint64_t seed = 0);

}  // namespace headlab::analysis

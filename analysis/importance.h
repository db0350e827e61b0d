// Gradient importance of each head: the mean over examples of |dL/d gate|
// (Michel et al. 2019), the first-order estimate of what ablating it costs.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// One entry per head, layer-major, over the first `max_examples` examples
// that have a target (one backward each). The gates are the only leaves that
// receive a gradient (autograd::GradOnlyFor): the model's parameters and
// their gradients are left alone, so this is safe mid-training.
std::vector<double> gate_importance(const layers::Transformer& model, const Examples& examples, int64_t max_examples);

}  // namespace headlab::analysis

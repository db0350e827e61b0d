// Ablation: what a head (or a set of heads) is worth to the loss and accuracy,
// measured by running the model through a probe with those heads' outputs
// (before W_O) removed or replaced. The model is never changed.
//
//   zero      the head's gate is 0: its output is 0
//   mean      its output at each position is the mean over the batch's
//             examples of its output at that position (over the examples
//             where the position is real, when rows are padded)
//   resample  example b gets the head's output on example (b + 1) mod B
//             (another input of the same batch)
#pragma once

#include <cstddef>
#include <vector>

#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

struct Ablation {
  double delta_loss = 0;      // loss(ablated) - base loss, nats
  double delta_accuracy = 0;  // accuracy(ablated) - base accuracy, fraction
};

enum class AblationKind { zero, mean, resample };

// One entry per head, layer-major (index = layer * heads + head), against
// `base` = evaluate(model, examples). Never changes the model.
std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                                   AblationKind kind = AblationKind::zero);

// The heads `heads` (layer-major indices) ablated together. Throws
// std::invalid_argument for an index outside the model.
Ablation ablate_set(const layers::Transformer& model, const Examples& examples, const EvalResult& base,
                    const std::vector<std::size_t>& heads, AblationKind kind = AblationKind::zero);

// Every layer's head outputs [B, T, d_model] on `examples`, unablated.
std::vector<core::Tensor> record_head_outputs(const layers::Transformer& model, const Examples& examples);

}  // namespace headlab::analysis

// Ablation: what each head is worth to the loss and accuracy, measured by
// running the model with that head's gate at 0 (before W_O) through a probe.
#pragma once

#include <vector>

#include "analysis/evaluate.h"
#include "layers/transformer.h"

namespace headlab::analysis {

struct Ablation {
  double delta_loss = 0;      // loss(gate = 0) - base loss, nats
  double delta_accuracy = 0;  // accuracy(gate = 0) - base accuracy, fraction
};

// One entry per head, layer-major (index = layer * heads + head), against
// `base` = evaluate(model, examples). Never changes the model.
std::vector<Ablation> ablate_heads(const layers::Transformer& model, const Examples& examples, const EvalResult& base);

}  // namespace headlab::analysis

// Direct logit attribution (docs/head-metrics.md, "Interventions"): how much
// each head's output, through the residual stream straight to the
// unembedding (no later layer), adds to the logit of the correct class.
//
//   c_h        = o_h W_O,h^T  [B, T, d_model]: head h's write into the residual
//                stream (o_h its columns of the probed head outputs; W_O's bias
//                belongs to no head)
//   DLA(h)     = mean over positions with a target y of  W_U[y] . LN*(c_h)
//   LN*(c)     = gamma * (c - mean(c)) / sigma  with sigma the final
//                LayerNorm's scale of the whole residual at that position
//                (frozen, as the residual it is part of sets it); without
//                LayerNorm, LN*(c) = c.
// For an attention-only model without LayerNorm the heads' DLAs of the last
// layer sum to the change of the mean correct logit when they are all zeroed.
#pragma once

#include <vector>

#include "analysis/evaluate.h"
#include "layers/probe.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// One value per head, layer-major, in logits. Never changes the model.
std::vector<double> direct_logit_attribution(const layers::Transformer& model, const Examples& examples);

// direct_logit_attribution over a set read in chunks: the same sums in the
// same order as one batch holding them all.
class DirectLogitSums {
 public:
  // `clean`: the probe of the examples' unablated pass (its head outputs
  // and last residual), the pass the analysis runs anyway.
  void add(const layers::Transformer& model, const Examples& examples, const layers::Probe& clean);
  std::vector<double> value() const;

 private:
  std::vector<double> total_;  // per head, over the positions with a target
  int64_t count_ = 0;
};

}  // namespace headlab::analysis

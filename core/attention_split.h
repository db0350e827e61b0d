// Fused attention (attention_kernels.h) as three stages, for the hook points
// that read or replace the scores or the probabilities:
//   scores:  S = scale * Q K^T, hidden keys -inf            q, k -> S [B, h, T, T]
//   softmax: P = softmax of each row's visible keys        S -> P [B, h, T, T]
//   apply:   out = gate * P V                               P, v -> out [B, T, d]
// Each stage runs the fused kernel's own blocks, chunks, GEMM calls and
// softmax rows, so the three composed give its bits. "Visible" keys are
// those the causal mask lets through (keys after the query are hidden, and
// P is 0 there whatever S says); padding hides keys in the scores only (-inf
// there), so a replaced S decides their fate.
#pragma once

#include "core/attention_kernels.h"
#include "core/tensor.h"

namespace headlab::core {

// q, k [B, T, d] -> S [B, h, T, T]; key_padding as in attention_forward.
Tensor attention_scores_forward(const Tensor& q, const Tensor& k, const AttentionShape& shape,
                                const Tensor& key_padding);
// dS -> dq, dk [B, T, d]; hidden entries (after the query, padded) carry none.
struct ScoresGrads {
  Tensor dq, dk;
};
ScoresGrads attention_scores_backward(const Tensor& dscores, const Tensor& q, const Tensor& k,
                                      const AttentionShape& shape, const Tensor& key_padding);

// S [B, h, T, T] -> P; backward: dP, P -> dS.
Tensor attention_softmax_forward(const Tensor& scores, bool causal);
Tensor attention_softmax_backward(const Tensor& dprobs, const Tensor& probs, bool causal);

// P [B, h, T, T], v [B, T, d], gates undefined or [h] -> out [B, T, d].
Tensor attention_apply_forward(const Tensor& probs, const Tensor& v, const AttentionShape& shape, const Tensor& gates);
// dout [B, T, d] -> dP [B, h, T, T] (0 on hidden keys), dv [B, T, d];
// dgates [h] only if want_dgates.
struct ApplyGrads {
  Tensor dprobs, dv, dgates;
};
ApplyGrads attention_apply_backward(const Tensor& dout, const Tensor& probs, const Tensor& v,
                                    const AttentionShape& shape, const Tensor& gates, bool want_dgates);

}  // namespace headlab::core

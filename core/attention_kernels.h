// Fused multi-head attention: the scores, the scale, the mask, the softmax
// and both products of every (batch, head) pair in one pass, forward and
// backward. Composed from matmul + mul + masked_fill + softmax, the same
// step allocates and walks five [B, h, T, T] tensors and copies the heads
// in and out of [B, h, T, d_k]; fused, it keeps only the probabilities
// (in bf16, or without a backward, not even those unless asked:
// attention_forward below).
//
// Shapes: q, k, v, out [B, T, d] with d = h * d_k, head i in columns
// i*d_k .. (i+1)*d_k - 1 (the Linear layers' own layout, so no permute
// copies); probs [B, h, T, T]. Per head:
//   P = softmax(mask(scale * Q K^T)),  out = gate * P V.
// The mask hides keys after the query (causal) and keys whose
// key_padding[b, key] is 0; a query that sees no key gets a row of zeros.
// Blocks of whole sequences (all their heads) are handed out to OpenMP
// threads in one parallel region; each block is computed whole by one thread,
// every product a single batched GEMM call over the block's (batch, head)
// grid (core/gemm.h). The blocks depend on the shape only: the bits never
// depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace headlab::core {

struct AttentionShape {
  int64_t heads = 1;
  bool causal = true;
  double scale = 1.0;  // usually 1 / sqrt(d_k)
};

// key_padding: undefined or [B, T] (any dtype; nonzero = a real token).
// gates: undefined (all 1) or [h] of q's dtype. The probabilities are kept
// for the backward, except in bf16 mixed precision (attention_in_bf16(),
// core/attention_bf16.h) when keep_probs is false: that backward recomputes
// them, which spares a [B, h, T, T] float tensor from the forward to the
// backward, and probs is left undefined. With hold_rounded, that bf16
// forward also rounds q, k and v once each, whole, and hands the copies over
// (`rounded`) for the backward below that reads them instead of q, k and v.
// backward false: no backward will be run from this forward, so with
// keep_probs false no precision keeps the probabilities (each block's live in
// a per-thread buffer while it is computed), and `out` has the same bits as
// with them kept: a no-grad pass without a probe allocates no [B, h, T, T].
class RoundedQkv;  // core/attention_bf16.h
struct AttentionForward {
  Tensor out;    // [B, T, d]
  Tensor probs;  // [B, h, T, T], or undefined (not kept)
  std::shared_ptr<const RoundedQkv> rounded;  // null unless asked for, in bf16, of a float32 q with elements
};
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                                   const Tensor& key_padding, const Tensor& gates, bool keep_probs = true,
                                   bool hold_rounded = false, bool backward = true);

// dout [B, T, d] -> dq, dk, dv [B, T, d]; dgates [h] only if want_dgates
// (sum over the batch of <dout_head, (P V)_head>, added in batch order).
// probs, key_padding and gates: the forward's. Undefined probs (a bf16
// forward that kept none) are recomputed, bit for bit, by the bf16 kernel,
// whatever the precision now; dgates reads kept probs.
struct AttentionGrads {
  Tensor dq, dk, dv, dgates;
};
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionShape& shape, const Tensor& key_padding,
                                  const Tensor& gates, bool want_dgates);
// The same from a forward's `rounded` copies of q, k and v, by the bf16
// kernel whatever the precision now, with the bits of the form above in
// bf16; no dgates (they read v's float32 values).
AttentionGrads attention_backward(const Tensor& dout, const RoundedQkv& rounded, const Tensor& probs,
                                  const AttentionShape& shape, const Tensor& key_padding, const Tensor& gates);

}  // namespace headlab::core

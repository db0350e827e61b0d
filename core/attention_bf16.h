// Internal: fused attention (attention_kernels.h) in bf16 mixed precision.
//
// The float32 kernels' blocks, chunks and products, with the products'
// operands rounded where they are made instead of once per product: per
// chunk, Q, K, V and dO are each rounded once for every product that reads
// them, and the softmax (forward and backward) writes its row's bf16 copy,
// P or dS, while the row is in cache. S and dP land in a dense per-thread
// buffer, where the softmax reads them, instead of in the [B, h, T, T]
// tensors (a strided C, which oneDNN would compute densely and copy). Each
// product is the call the float32 kernel's products make in bf16 precision
// (the same rounded operands, packed alike, the same dense C), and the
// softmax rows are the same code, so the bits are that kernel's under bf16
// precision, and (forward) those of the three-stage form
// (attention_split.h). docs/performance.md measures the passes it saves.
//
// P [B, h, T, T] is written only where a caller reads it (P not null): the
// probe, or the gates' gradient. Otherwise the forward's softmax rows pass
// through a per-thread row, and the backward recomputes each chunk's S = Q K^T
// with the forward's own call and P's rows with the same scores_row_to_probs:
// the same bits as a stored P, for one more product and softmax per chunk,
// and no f32 [B, h, T, T] tensor kept from the forward to the backward.
//
// In a training step (RoundedQkv below) the forward rounds Q, K and V once
// each, whole, into head-major buffers it hands to the backward, and every
// chunk's products read their rows from there; the backward rounds dO once,
// whole, the same way. The operands' values are the per-chunk rounding's,
// and so are the products' bits (only their batch strides differ).
#pragma once

#include <cstdint>

#include "core/attention_blocks.h"
#include "core/bf16.h"

namespace headlab::core {

// q, k and v [B, T, d] rounded to bf16, whole, head-major: [B, h, T, d_k]
// each, a head's rows dense (row t of head (b, i) at ((b h + i) T + t) d_k).
// The bf16 forward writes them for its backward, which reads them instead
// of q, k and v, whose float32 values can then be freed after the forward
// (autograd/ops_attention.cpp). Their memory is two Storages, so that a
// step's copies come back from the buffer cache (core/tensor.cpp) instead
// of as fresh pages to fault in every step (std::vector's: 3,100 page
// faults a step on medium). q and k share one of B T d floats' bytes, the
// size of the step's [B, T, d] float32 tensors, to which the cache, keyed
// by size, hands it once the backward has freed it; a Storage of all three
// would wait unused in the cache for the next step's forward (medium's
// peak RSS 5 MiB higher; docs/performance.md).
class RoundedQkv {
 public:
  explicit RoundedQkv(const Shape& shape);  // q's [B, T, d]; the values unset
  const Shape& shape() const { return shape_; }
  // Operand 0, 1 or 2 (q, k, v), B * T * d values.
  bf16_t* operand(int which) const {
    return static_cast<bf16_t*>(which < 2 ? qk_.data() : v_.data()) + (which % 2) * numel_;
  }

 private:
  Shape shape_;
  int64_t numel_;
  Storage qk_, v_;  // q then k; v
};

}  // namespace headlab::core

namespace headlab::core::attention_detail {

// Whether float32 attention's products run in bf16 now (gemm_precision()).
bool attention_in_bf16();

// As attention_fwd and attention_bwd (attention_kernels.cpp), for float:
// q, k, v, out, dout, dq, dk_out, dv [B, T, d]; P [B, h, T, T] or null (not
// kept: the backward recomputes it from q, k and real [B * T], as the
// forward made it; dgate_part needs a kept P). With `out16`, out [B, T, d]
// is also written there rounded to bf16, block by block after its gates,
// for the output projection that reads it next (core/bf16_operands.h).
// With `hold` (of q's shape), the forward rounds q, k and v
// into it whole; with `held`, the backward reads them there, and q, k and v
// may be null (then dgate_part must be: it reads v).
void attention_fwd_bf16(const float* q, const float* k, const float* v, float* out, float* P, const Dims& dims,
                        const AttentionShape& s, const unsigned char* real, const float* gates, bf16_t* out16,
                        RoundedQkv* hold = nullptr);
void attention_bwd_bf16(const float* dout, const float* q, const float* k, const float* v, const float* P,
                        const unsigned char* real, float* dq, float* dk_out, float* dv, const Dims& dims,
                        const AttentionShape& s, const float* gates, double* dgate_part,
                        const RoundedQkv* held = nullptr);

}  // namespace headlab::core::attention_detail

// Fused attention in bf16 mixed precision: see attention_bf16.h.
#include "core/attention_bf16.h"

#include <algorithm>

#include "core/bf16.h"
#include "core/gemm.h"

namespace headlab::core {

RoundedQkv::RoundedQkv(const Shape& shape)
    : shape_(shape),
      numel_(numel_of(shape)),
      qk_(static_cast<std::size_t>(numel_) * sizeof(float)),
      v_(static_cast<std::size_t>(numel_) * sizeof(bf16_t)) {}

}  // namespace headlab::core

namespace headlab::core::attention_detail {
namespace {

// This thread's bf16 buffers, one per operand a chunk keeps (kQ, kK and
// kV are also RoundedQkv's operand numbers), and the backward's dO rounded
// whole.
enum Slot { kQ, kK, kV, kDout, kP, kDs, kWholeDout };
// Its float buffers: S (the backward's dP, then dS) and the backward's
// recomputed S (then P, where P is not kept). Slots 1 and 2 are
// gated_dout's and gate_grads' (attention_blocks.h).
enum FloatSlot { kScores = 0, kRecomputed = 3 };

// Rows [r0, r0 + rows) of each of the block's heads of x, [rows, cols]
// each, rounded into `out` densely in the block's (batch row, head) order:
// [nb, h, rows, cols], the layout core/gemm_bf16.cpp packs a batch in.
Heads<const bf16_t> round_heads(Heads<const float> x, int64_t nb, int64_t h, int64_t r0, int64_t rows,
                                int64_t cols, bf16_t* out) {
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t head = 0; head < h; ++head)
      pack_bf16(x.p + b * x.s0 + head * x.s1 + r0 * x.ld, rows, cols, x.ld, out + (b * h + head) * rows * cols);
  return {out, cols, h * rows * cols, rows * cols};
}

// A [nb, h, rows, cols] bf16 buffer of this thread, as heads.
Heads<bf16_t> dense_heads(int64_t nb, int64_t h, int64_t rows, int64_t cols, Slot slot) {
  bf16_t* p = scratch<bf16_t>(static_cast<std::size_t>(nb * h * rows * cols), slot);
  return {p, cols, h * rows * cols, rows * cols};
}

// Q, K, V or dO of a block, [T, dk] per head, as a chunk's products read
// it: rounded per chunk from the float32 rows x into `slot`; or, rounded
// once, whole, head-major [nb, h, T, dk] (`whole`, T rows), a chunk's rows
// taken from there. Those are dense only when they are all T rows: other
// row ranges are copied into `slot`, densely, for oneDNN 2.6 runs a batch of
// bf16 products on its brgemm (AMX) kernels only when the batch is dense,
// and on gemm:jit otherwise (measured with ONEDNN_VERBOSE; see
// docs/performance.md). Either way the product reads the per-chunk
// rounding's values in its layout: the same call, the same bits.
struct Operand {
  Heads<const float> x;
  Heads<const bf16_t> whole;
  int64_t T;
  Slot slot;

  // Rows [r0, r0 + rows), the first `cols` columns, of every head.
  Heads<const bf16_t> rows(int64_t nb, int64_t h, int64_t r0, int64_t rows, int64_t cols) const {
    if (whole.p && rows == T) return whole;
    const Heads<bf16_t> out = dense_heads(nb, h, rows, cols, slot);
    if (!whole.p) return round_heads(x, nb, h, r0, rows, cols, out.p);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t head = 0; head < h; ++head)
        std::copy_n(whole.p + b * whole.s0 + head * whole.s1 + r0 * whole.ld, rows * cols,
                    out.p + (b * h + head) * rows * cols);
    return in(out);
  }
};

// Rounded per chunk from x's block.
Operand per_chunk(const float* x, const Dims& dims, const Block& blk, Slot slot) {
  return {seq_heads(x, dims, blk.b0), {}, dims.T, slot};
}

// x's block rounded whole into `out` ([nb, h, T, dk]).
Operand rounded_whole(Heads<const float> x, int64_t nb, const Dims& dims, bf16_t* out, Slot slot) {
  return {{}, round_heads(x, nb, dims.h, 0, dims.T, dims.dk, out), dims.T, slot};
}

// The block's part of a head-major [B, h, T, dk] copy.
Operand held_rows(const bf16_t* all, const Dims& dims, const Block& blk, Slot slot) {
  const bf16_t* p = all + blk.b0 * dims.h * dims.T * dims.dk;
  return {{}, {p, dims.dk, dims.h * dims.T * dims.dk, dims.T * dims.dk}, dims.T, slot};
}

// One (batch row, head) pair's probabilities for a chunk's rows: rows
// [r0, r1) of P, `ld` apart.
template <class F>
struct PairRows {
  F* p = nullptr;
  int64_t ld = 0;
};
using PairProbs = PairRows<float>;

// The pair's rows of the kept P ([B, h, T, T]), or none (P not kept).
template <class F>
PairRows<F> pair_probs(F* P, const Block& blk, int64_t pair, const Dims& dims, const Chunk& ch) {
  if (P == nullptr) return {};
  return {P + (blk.b0 * dims.h + pair) * dims.T * dims.T + ch.r0 * dims.T, dims.T};
}

// The pair's scores S [rows, keys] (dense, scaled here) -> P = softmax(scale
// S), row by row, into `kept` (P's rows, zeros up to T) or, not kept, over S
// (its `keys` columns: a row's zeros past its padding to 16 keys are the
// same zeros); then P's rows rounded into p16 [rows, keys] in one call, not
// one call per row. Either way each row's softmax runs over the same padded
// length, so P's bits do not depend on where it goes.
PairProbs probs_of_pair(float* S, PairProbs kept, const Chunk& ch, int64_t Tn, bool causal, float scale,
                        const unsigned char* real_b, bf16_t* p16) {
  const int64_t rows = ch.r1 - ch.r0;
  const PairProbs out = kept.p ? kept : PairProbs{S, ch.keys};
  const int64_t width = kept.p ? Tn : ch.keys;
  for (int64_t i = ch.r0; i < ch.r1; ++i)
    scores_row_to_probs(S + (i - ch.r0) * ch.keys, out.p + (i - ch.r0) * out.ld, causal ? i + 1 : Tn, width, scale,
                        real_b);
  pack_bf16(out.p, rows, ch.keys, out.ld, p16);
  return out;
}

// C_(b,h) = op(A_(b,h)) op(B_(b,h)) + beta C_(b,h) over the block's grid.
void rounded_heads_gemm(int64_t nb, int64_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        Heads<const bf16_t> a, Heads<const bf16_t> b, Heads<float> c, float beta = 0.0f) {
  detail::packed_bf16_gemm({.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .outer = nb, .inner = h, .a = a.p,
                            .lda = a.ld, .a_stride = {a.s0, a.s1}, .b = b.p, .ldb = b.ld,
                            .b_stride = {b.s0, b.s1}, .ldc = c.ld, .c_stride = {c.s0, c.s1}},
                           1.0f, beta, c.p);
}

// A dense [nb, h, rows, keys] float buffer of this thread, as heads.
Heads<float> dense_scores(int64_t nb, int64_t h, int64_t rows, int64_t keys, FloatSlot slot) {
  float* p = scratch<float>(static_cast<std::size_t>(nb * h * rows * keys), slot);
  return {p, keys, h * rows * keys, rows * keys};
}

// S = Q K^T over a chunk's rows and the keys they see, [nb, h, rows, keys]
// in the dense buffer `slot`, from Q's rows and K's keys: the forward's
// call, which the backward repeats to get P's bits back.
Heads<float> chunk_scores(int64_t nb, int64_t h, const Chunk& ch, int64_t dk, Heads<const bf16_t> q16,
                          Heads<const bf16_t> k16, FloatSlot slot) {
  const Heads<float> S = dense_scores(nb, h, ch.r1 - ch.r0, ch.keys, slot);
  rounded_heads_gemm(nb, h, false, true, ch.r1 - ch.r0, ch.keys, dk, q16, k16, S);
  return S;
}

}  // namespace

bool attention_in_bf16() { return gemm_precision() == GemmPrecision::bf16; }

void attention_fwd_bf16(const float* q, const float* k, const float* v, float* out, float* P, const Dims& dims,
                        const AttentionShape& s, const unsigned char* real, const float* gates, bf16_t* out16,
                        RoundedQkv* hold) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const auto scale = static_cast<float>(s.scale);
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    // Held: rounded whole into the block's part of the copies.
    const auto operand = [&](const float* x, Slot slot) {
      return hold ? rounded_whole(seq_heads(x, dims, blk.b0), nb, dims, hold->operand(slot) + blk.b0 * h * Tn * dk,
                                  slot)
                  : per_chunk(x, dims, blk, slot);
    };
    const Operand Q = operand(q, kQ), K = operand(k, kK), V = operand(v, kV);
    const Heads<float> O = seq_heads(out, dims, blk.b0);
    for (int64_t c = 0; c < chunk_count(Tn, s.causal); ++c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      // P = softmax(scale S) into P's rows (or, not kept, over S) and, rounded, into kP.
      const Heads<float> S = chunk_scores(nb, h, ch, dk, Q.rows(nb, h, ch.r0, rows, dk),
                                          K.rows(nb, h, 0, ch.keys, dk), kScores);
      const Heads<bf16_t> p16 = dense_heads(nb, h, rows, ch.keys, kP);
      for (int64_t pair = 0; pair < nb * h; ++pair)
        probs_of_pair(S.p + pair * rows * ch.keys, pair_probs(P, blk, pair, dims, ch), ch, Tn, s.causal, scale,
                      real ? real + (blk.b0 + pair / h) * Tn : nullptr, p16.p + pair * rows * ch.keys);
      // P V: rows r0..r1 [rows, dk].
      rounded_heads_gemm(nb, h, false, false, rows, dk, ch.keys, in(p16), V.rows(nb, h, 0, ch.keys, dk),
                         O.rows_from(ch.r0));
    }
    if (gates) gate_heads(out, dims, blk, gates);
    if (out16) pack_bf16(out + blk.b0 * Tn * dims.d, nb * Tn, dims.d, dims.d, out16 + blk.b0 * Tn * dims.d);
  }
}

void attention_bwd_bf16(const float* dout, const float* q, const float* k, const float* v, const float* P,
                        const unsigned char* real, float* dq, float* dk_out, float* dv, const Dims& dims,
                        const AttentionShape& s, const float* gates, double* dgate_part, const RoundedQkv* held) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const auto scale = static_cast<float>(s.scale);
  bool gated = false;
  for (int64_t head = 0; gates && head < h; ++head) gated = gated || gates[head] != 1.0f;
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    Heads<const float> dOf = seq_heads(dout, dims, blk.b0);
    if (gated) dOf = gated_dout(dout, dims, blk, gates);
    // With the forward's rounded Q, K and V, dO is rounded whole too; else
    // each is rounded per chunk (q, k and v are not null then).
    const Operand dO = held ? rounded_whole(dOf, nb, dims, dense_heads(nb, h, Tn, dk, kWholeDout).p, kDout)
                            : Operand{dOf, {}, Tn, kDout};
    const auto operand = [&](const float* x, Slot slot) {
      return held ? held_rows(held->operand(slot), dims, blk, slot) : per_chunk(x, dims, blk, slot);
    };
    const Operand Q = operand(q, kQ), K = operand(k, kK), V = operand(v, kV);
    const Heads<float> dQ = seq_heads(dq, dims, blk.b0), dK = seq_heads(dk_out, dims, blk.b0),
                       dV = seq_heads(dv, dims, blk.b0);
    // Chunks from the last, which reaches every key: it sets dV and dK
    // (beta 0), and each earlier chunk adds to their first `keys` rows.
    const int64_t chunks = chunk_count(Tn, s.causal);
    for (int64_t c = chunks - 1; c >= 0; --c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      const float beta = c == chunks - 1 ? 0.0f : 1.0f;
      const Heads<const bf16_t> q16 = Q.rows(nb, h, ch.r0, rows, dk), k16 = K.rows(nb, h, 0, ch.keys, dk);
      // P not kept: the forward's S again, its rows' probabilities below.
      const Heads<float> S = P ? Heads<float>{} : chunk_scores(nb, h, ch, dk, q16, k16, kRecomputed);
      const Heads<const bf16_t> dO16 = dO.rows(nb, h, ch.r0, rows, dk);
      const Heads<float> dS = dense_scores(nb, h, rows, ch.keys, kScores);
      rounded_heads_gemm(nb, h, false, true, rows, ch.keys, dk, dO16, V.rows(nb, h, 0, ch.keys, dk),
                         dS);  // dP = dO' V^T
      // dS over dP, in place, and the rounded copies of dS and of P (not
      // kept: the forward's, again, over the recomputed S).
      const Heads<bf16_t> p16 = dense_heads(nb, h, rows, ch.keys, kP), ds16 = dense_heads(nb, h, rows, ch.keys, kDs);
      for (int64_t pair = 0; pair < nb * h; ++pair) {
        const int64_t at = pair * rows * ch.keys;
        PairRows<const float> pp = pair_probs(P, blk, pair, dims, ch);
        if (!P) {
          const PairProbs recomputed = probs_of_pair(S.p + at, {}, ch, Tn, s.causal, scale,
                                                     real ? real + (blk.b0 + pair / h) * Tn : nullptr, p16.p + at);
          pp = {recomputed.p, recomputed.ld};
        }
        for (int64_t i = ch.r0; i < ch.r1; ++i)
          probs_row_grad(dS.p + at + (i - ch.r0) * ch.keys, pp.p + (i - ch.r0) * pp.ld, s.causal ? i + 1 : Tn,
                         ch.keys, scale);
        pack_bf16(dS.p + at, rows, ch.keys, ch.keys, ds16.p + at);
        if (P) pack_bf16(pp.p, rows, ch.keys, pp.ld, p16.p + at);
      }
      rounded_heads_gemm(nb, h, true, false, ch.keys, dk, rows, in(p16), dO16, dV, beta);         // dV += P^T dO'
      rounded_heads_gemm(nb, h, false, false, rows, dk, ch.keys, in(ds16), k16, dQ.rows_from(ch.r0));  // dQ = dS K
      rounded_heads_gemm(nb, h, true, false, ch.keys, dk, rows, in(ds16), q16, dK, beta);         // dK += dS^T Q
    }
    if (dgate_part) gate_grads(dout, score_heads(P, dims, blk.b0), seq_heads(v, dims, blk.b0), dims, blk, dgate_part);
  }
}

}  // namespace headlab::core::attention_detail

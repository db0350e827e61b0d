// Fused multi-head attention, forward and backward. See attention_kernels.h
// for the shapes and the contract.
#include "core/attention_kernels.h"

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/attention_bf16.h"
#include "core/attention_blocks.h"
#include "core/bf16_operands.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

using namespace attention_detail;

// q, k, v, out [B, T, d]; P [B, h, T, T], or null: not kept, each block's
// probabilities then live in a per-thread buffer of the block's [nb, h, T, T]
// (the same layout from the block's first row, so the same GEMM calls on the
// same values: the same bits). A pass that no backward and no probe reads
// (the head analysis's ablations) so holds no [B, h, T, T] tensor.
template <class T>
void attention_fwd(const T* q, const T* k, const T* v, T* out, T* P, const Dims& dims, const AttentionShape& s,
                   const unsigned char* real, const T* gates) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const T scale = static_cast<T>(s.scale);
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    const Heads<const T> Q = seq_heads(q, dims, blk.b0), K = seq_heads(k, dims, blk.b0), V = seq_heads(v, dims, blk.b0);
    // The block's probabilities: P's rows, or the buffer's from its start.
    T* const Pblk = P != nullptr ? P + blk.b0 * h * Tn * Tn : scratch<T>(static_cast<std::size_t>(nb * h * Tn * Tn), 0);
    const Heads<T> Pb = score_heads(Pblk, dims, 0), O = seq_heads(out, dims, blk.b0);
    for (int64_t c = 0; c < chunk_count(Tn, s.causal); ++c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      // S = Q K^T: rows r0..r1, keys 0..keys; scaled with the softmax.
      heads_gemm<T>(nb, h, false, true, rows, ch.keys, dk, Q.rows_from(ch.r0), K, Pb.rows_from(ch.r0));
      for (int64_t pair = blk.b0 * h; pair < blk.b1 * h; ++pair) {
        const unsigned char* real_b = real ? real + (pair / h) * Tn : nullptr;
        for (int64_t i = ch.r0; i < ch.r1; ++i) {
          T* row = Pblk + (pair - blk.b0 * h) * Tn * Tn + i * Tn;
          scores_row_to_probs(row, row, s.causal ? i + 1 : Tn, Tn, scale, real_b);
        }
      }
      // P V: rows r0..r1 [rows, dk].
      heads_gemm<T>(nb, h, false, false, rows, dk, ch.keys, in(Pb.rows_from(ch.r0)), V, O.rows_from(ch.r0));
    }
    if (gates) gate_heads(out, dims, blk, gates);
  }
}

// dout, q, k, v, dq, dk, dv [B, T, d]; P [B, h, T, T]; dgate_part [B * h] or null.
template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* P, T* dq, T* dk_out, T* dv,
                   const Dims& dims, const AttentionShape& s, const T* gates, double* dgate_part) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const T scale = static_cast<T>(s.scale);
  bool gated = false;
  for (int64_t head = 0; gates && head < h; ++head) gated = gated || gates[head] != T(1);
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    // Per block: dS [nb, h, T, T]; the gated dout [nb, T, d] when some gate is not 1.
    const Heads<T> dS = score_heads(scratch<T>(static_cast<std::size_t>(nb * h * Tn * Tn), 0), dims, 0);
    Heads<const T> dO = seq_heads(dout, dims, blk.b0);
    if (gated) dO = gated_dout(dout, dims, blk, gates);
    const Heads<const T> Q = seq_heads(q, dims, blk.b0), K = seq_heads(k, dims, blk.b0), V = seq_heads(v, dims, blk.b0);
    const Heads<const T> Pb = score_heads(P, dims, blk.b0);
    const Heads<T> dQ = seq_heads(dq, dims, blk.b0), dK = seq_heads(dk_out, dims, blk.b0),
                   dV = seq_heads(dv, dims, blk.b0);
    // Chunks from the last, which reaches every key: it sets dV and dK
    // (beta 0), and each earlier chunk adds to their first `keys` rows.
    const int64_t chunks = chunk_count(Tn, s.causal);
    for (int64_t c = chunks - 1; c >= 0; --c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      const T beta = c == chunks - 1 ? T(0) : T(1);
      const Heads<const T> Pc = Pb.rows_from(ch.r0), dOc = dO.rows_from(ch.r0);
      const Heads<T> dSc = dS.rows_from(ch.r0);
      heads_gemm<T>(nb, h, false, true, rows, ch.keys, dk, dOc, V, dSc);                  // dP = dO' V^T
      heads_gemm<T>(nb, h, true, false, ch.keys, dk, rows, Pc, dOc, dV, T(1), beta);      // dV += P^T dO'
      // Softmax backward, then the scale.
      for (int64_t pair = 0; pair < nb * h; ++pair)
        for (int64_t i = ch.r0; i < ch.r1; ++i)
          probs_row_grad(dS.p + pair * Tn * Tn + i * Tn, P + (blk.b0 * h + pair) * Tn * Tn + i * Tn,
                         s.causal ? i + 1 : Tn, ch.keys, scale);
      heads_gemm<T>(nb, h, false, false, rows, dk, ch.keys, in(dSc), K, dQ.rows_from(ch.r0));       // dQ = dS K
      heads_gemm<T>(nb, h, true, false, ch.keys, dk, rows, in(dSc), Q.rows_from(ch.r0), dK, T(1), beta);  // dK += dS^T Q
    }
    if (dgate_part) gate_grads(dout, Pb, V, dims, blk, dgate_part);
  }
}

// dout like q ([B, T, d] of dims, `dtype`), and probs undefined or [B, h, T, T].
void check_dout_and_probs(const Tensor& dout, const Tensor& probs, const Dims& dims, DType dtype, const char* op) {
  const Shape seq{dims.B, dims.T, dims.d}, scores{dims.B, dims.h, dims.T, dims.T};
  if (!dout.defined() || dout.shape() != seq || dout.dtype() != dtype)
    throw std::invalid_argument(std::string(op) + ": dout must be like q, " + to_string(dtype) + " " +
                                to_string(seq));
  if (probs.defined() && (probs.shape() != scores || probs.dtype() != dtype))
    throw std::invalid_argument(std::string(op) + ": probs must be [B, h, T, T] = " + to_string(scores) +
                                " of q's dtype");
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                                   const Tensor& key_padding, const Tensor& gates, bool keep_probs,
                                   bool hold_rounded, bool backward) {
  const char* op = "attention_forward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  const std::vector<unsigned char> real = real_keys(key_padding, dims);
  // Only the bf16 kernel's backward can do without P: float32 products are
  // too slow to compute twice. Without a backward, nothing reads them.
  const bool keep = keep_probs || (backward && (q.dtype() != DType::f32 || !attention_in_bf16()));
  AttentionForward r{Tensor::empty(q.shape(), q.dtype()),
                     keep ? Tensor::empty({dims.B, dims.h, dims.T, dims.T}, q.dtype()) : Tensor(), nullptr};
  if (q.numel() == 0) {  // no queries, or d = 0: nothing to attend with
    if (keep) r.probs.fill_(0.0);
    return r;
  }
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* gp = gc.defined() ? gc.data<T>() : nullptr;
    const unsigned char* rp = real.empty() ? nullptr : real.data();
    if constexpr (std::is_same_v<T, float>)
      if (attention_in_bf16()) {  // with the rounded copy the output projection reads, in a training step
        std::shared_ptr<RoundedQkv> hold = hold_rounded ? std::make_shared<RoundedQkv>(q.shape()) : nullptr;
        attention_fwd_bf16(qc.data<T>(), kc.data<T>(), vc.data<T>(), r.out.data<T>(),
                           keep ? r.probs.data<T>() : nullptr, dims, shape, rp, gp,
                           bf16_copy_of_output(r.out, dims.d), hold.get());
        r.rounded = std::move(hold);
        return;
      }
    attention_fwd<T>(qc.data<T>(), kc.data<T>(), vc.data<T>(), r.out.data<T>(), keep ? r.probs.data<T>() : nullptr,
                     dims, shape, rp, gp);
  });
  return r;
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionShape& shape, const Tensor& key_padding,
                                  const Tensor& gates, bool want_dgates) {
  const char* op = "attention_backward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  check_dout_and_probs(dout, probs, dims, q.dtype(), op);
  if (!probs.defined() && (q.dtype() != DType::f32 || want_dgates))
    throw std::invalid_argument(std::string(op) + ": probs are undefined, which only a float32 q without the gates' " +
                                "gradient allows (the bf16 kernel recomputes them): keep them in attention_forward");
  // The padding matters only to a recomputed P.
  const std::vector<unsigned char> real =
      probs.defined() ? std::vector<unsigned char>() : real_keys(key_padding, dims);
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(q.shape(), q.dtype()),
                   Tensor::empty(q.shape(), q.dtype()), Tensor()};
  std::vector<double> part(want_dgates ? static_cast<std::size_t>(dims.pairs()) : 0, 0.0);
  if (q.numel() > 0) {
    const Tensor dc = dout.contiguous(), qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const Tensor pc = probs.defined() ? probs.contiguous() : Tensor();
    const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
    dispatch(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pp = pc.defined() ? pc.data<T>() : nullptr;
      const T* gp = gc.defined() ? gc.data<T>() : nullptr;
      double* dgp = want_dgates ? part.data() : nullptr;
      if constexpr (std::is_same_v<T, float>)
        if (attention_in_bf16() || !pp)  // no probs: the forward ran in bf16
          return attention_bwd_bf16(dc.data<T>(), qc.data<T>(), kc.data<T>(), vc.data<T>(), pp,
                                    real.empty() ? nullptr : real.data(), g.dq.data<T>(), g.dk.data<T>(),
                                    g.dv.data<T>(), dims, shape, gp, dgp);
      attention_bwd<T>(dc.data<T>(), qc.data<T>(), kc.data<T>(), vc.data<T>(), pp, g.dq.data<T>(), g.dk.data<T>(),
                       g.dv.data<T>(), dims, shape, gp, dgp);
    });
  }
  if (want_dgates) {
    std::vector<double> sums(static_cast<std::size_t>(dims.h), 0.0);
    for (int64_t pair = 0; pair < dims.pairs(); ++pair)  // batch order: fixed
      sums[static_cast<std::size_t>(pair % dims.h)] += part[static_cast<std::size_t>(pair)];
    g.dgates = Tensor::from_vector(sums, {dims.h}, q.dtype());
  }
  return g;
}

AttentionGrads attention_backward(const Tensor& dout, const RoundedQkv& rounded, const Tensor& probs,
                                  const AttentionShape& shape, const Tensor& key_padding, const Tensor& gates) {
  const char* op = "attention_backward";
  // The forward checked the shape; the copies are q, k and v's.
  const Shape& qs = rounded.shape();
  const Dims dims{qs[0], qs[1], qs[2], shape.heads, qs[2] / shape.heads};
  check_gates(gates, dims, DType::f32, op);
  check_dout_and_probs(dout, probs, dims, DType::f32, op);
  const std::vector<unsigned char> real =
      probs.defined() ? std::vector<unsigned char>() : real_keys(key_padding, dims);
  AttentionGrads g{Tensor::empty(qs, DType::f32), Tensor::empty(qs, DType::f32), Tensor::empty(qs, DType::f32),
                   Tensor()};
  const Tensor dc = dout.contiguous();
  const Tensor pc = probs.defined() ? probs.contiguous() : Tensor();
  const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
  attention_bwd_bf16(dc.data<float>(), nullptr, nullptr, nullptr, pc.defined() ? pc.data<float>() : nullptr,
                     real.empty() ? nullptr : real.data(), g.dq.data<float>(), g.dk.data<float>(),
                     g.dv.data<float>(), dims, shape, gc.defined() ? gc.data<float>() : nullptr, nullptr, &rounded);
  return g;
}

}  // namespace headlab::core

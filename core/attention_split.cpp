// The three stages of fused attention. See attention_split.h for the
// contract; attention_kernels.cpp is the fused form whose bits they repeat.
#include "core/attention_split.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/attention_blocks.h"
#include "core/softmax_row.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

using namespace attention_detail;

// Keys row i of a sequence may see: all, or up to i when causal.
int64_t visible(int64_t i, int64_t Tn, bool causal) { return causal ? i + 1 : Tn; }

Dims probs_dims(const Tensor& p, const Tensor& v, const AttentionShape& s, const char* op) {
  const Dims dims = check_qkv(v, v, v, s, op);
  if (!p.defined() || p.shape() != Shape{dims.B, dims.h, dims.T, dims.T} || p.dtype() != v.dtype())
    throw std::invalid_argument(std::string(op) + ": probs must be " + to_string(v.dtype()) + " " +
                                to_string(Shape{dims.B, dims.h, dims.T, dims.T}) + ", got " +
                                (p.defined() ? to_string(p.dtype()) + " " + to_string(p.shape()) : "none"));
  return dims;
}

void check_square(const Tensor& s, const char* op) {
  if (!s.defined() || s.dim() != 4 || s.size(2) != s.size(3))
    throw std::invalid_argument(std::string(op) + ": expected [B, h, T, T], got " +
                                (s.defined() ? to_string(s.shape()) : "none"));
}

// Sets the entries of rows [B, h, T, T] that no query uses to `value`, for
// the pairs [p0, p1): keys after the query when causal, padded keys when
// `real` is given.
template <class T>
void mask_rows(T* x, const Dims& dims, bool causal, const unsigned char* real, T value, int64_t p0, int64_t p1) {
  const int64_t Tn = dims.T;
  for (int64_t pair = p0; pair < p1; ++pair) {
    const unsigned char* real_b = real ? real + (pair / dims.h) * Tn : nullptr;
    for (int64_t i = 0; i < Tn; ++i) {
      T* row = x + (pair * Tn + i) * Tn;
      const int64_t n = visible(i, Tn, causal);
      std::fill(row + n, row + Tn, value);
      if (real_b)
        for (int64_t j = 0; j < n; ++j)
          if (!real_b[j]) row[j] = value;
    }
  }
}

// A copy of x [B, h, T, T] with the entries no query uses set to 0.
template <class T>
std::vector<T> hide(const T* x, const Dims& dims, bool causal, const unsigned char* real) {
  std::vector<T> y(x, x + dims.pairs() * dims.T * dims.T);
  mask_rows(y.data(), dims, causal, real, T(0), 0, dims.pairs());
  return y;
}

// q, k [B, T, d] -> S [B, h, T, T]: the fused forward's first GEMM, then its mask.
template <class T>
void scores_fwd(const T* q, const T* k, T* S, const Dims& dims, const AttentionShape& s, const unsigned char* real) {
  const int64_t Tn = dims.T, h = dims.h;
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const Heads<const T> Q = seq_heads(q, dims, blk.b0), K = seq_heads(k, dims, blk.b0);
    const Heads<T> Sb = score_heads(S, dims, blk.b0);
    for (int64_t c = 0; c < chunk_count(Tn, s.causal); ++c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      heads_gemm<T>(blk.rows(), h, false, true, ch.r1 - ch.r0, ch.keys, dims.dk, Q.rows_from(ch.r0), K,
                    Sb.rows_from(ch.r0));
    }
    // The scale on the visible keys after the GEMM, as the fused forward.
    const T scale = static_cast<T>(s.scale);
    for (int64_t pair = blk.b0 * h; pair < blk.b1 * h; ++pair)
      for (int64_t i = 0; i < Tn; ++i) {
        T* row = S + (pair * Tn + i) * Tn;
        const int64_t n = visible(i, Tn, s.causal);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) row[j] *= scale;
      }
    mask_rows(S, dims, s.causal, real, -std::numeric_limits<T>::infinity(), blk.b0 * h, blk.b1 * h);
  }
}

// dS -> dq, dk: dQ = scale dS K, dK = scale dS^T Q, chunk by chunk as the
// fused backward (the last chunk reaches every key and sets dK).
template <class T>
void scores_bwd(const T* dS, const T* q, const T* k, T* dq, T* dk_out, const Dims& dims, const AttentionShape& s) {
  const int64_t Tn = dims.T, h = dims.h;
  const T scale = static_cast<T>(s.scale);
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    const Heads<const T> Q = seq_heads(q, dims, blk.b0), K = seq_heads(k, dims, blk.b0);
    const Heads<const T> G = score_heads(dS, dims, blk.b0);
    const Heads<T> dQ = seq_heads(dq, dims, blk.b0), dK = seq_heads(dk_out, dims, blk.b0);
    const int64_t chunks = chunk_count(Tn, s.causal);
    for (int64_t c = chunks - 1; c >= 0; --c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      const T beta = c == chunks - 1 ? T(0) : T(1);
      heads_gemm<T>(nb, h, false, false, rows, dims.dk, ch.keys, G.rows_from(ch.r0), K, dQ.rows_from(ch.r0), scale);
      heads_gemm<T>(nb, h, true, false, ch.keys, dims.dk, rows, G.rows_from(ch.r0), Q.rows_from(ch.r0), dK, scale,
                    beta);
    }
  }
}

// S -> P, row by row exactly as the fused forward: the visible keys, rounded
// up to whole 16-float vectors with -inf, then zeros.
template <class T>
void softmax_fwd(const T* S, T* P, int64_t pairs, int64_t Tn, bool causal) {
#pragma omp parallel for schedule(static) if (pairs * Tn * Tn >= kParallelGrain)
  for (int64_t pair = 0; pair < pairs; ++pair)
    for (int64_t i = 0; i < Tn; ++i) {
      const T* src = S + (pair * Tn + i) * Tn;
      T* row = P + (pair * Tn + i) * Tn;
      const int64_t n = visible(i, Tn, causal);
      const int64_t padded = std::min(Tn, (n + 15) / 16 * 16);
      std::copy(src, src + n, row);
      std::fill(row + n, row + padded, -std::numeric_limits<T>::infinity());
      double row_max = 0.0, sum = 0.0;
      detail::softmax_row(row, row, padded, row_max, sum);
      std::fill(row + padded, row + Tn, T(0));
    }
}

// dS = P * (dP - rowsum(dP * P)) on the visible keys, 0 elsewhere.
template <class T>
void softmax_bwd(const T* dP, const T* P, T* dS, int64_t pairs, int64_t Tn, bool causal) {
#pragma omp parallel for schedule(static) if (pairs * Tn * Tn >= kParallelGrain)
  for (int64_t pair = 0; pair < pairs; ++pair)
    for (int64_t i = 0; i < Tn; ++i) {
      const int64_t off = (pair * Tn + i) * Tn;
      const int64_t n = visible(i, Tn, causal);
      T dt = 0;
      for (int64_t j = 0; j < n; ++j) dt += dP[off + j] * P[off + j];
      for (int64_t j = 0; j < n; ++j) dS[off + j] = P[off + j] * (dP[off + j] - dt);
      std::fill(dS + off + n, dS + off + Tn, T(0));
    }
}

// P (hidden keys 0), v -> out = gate * P V: the fused forward's second GEMM and gates.
template <class T>
void apply_fwd(const T* P, const T* v, T* out, const Dims& dims, const AttentionShape& s, const T* gates) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const Heads<const T> V = seq_heads(v, dims, blk.b0), Pb = score_heads(P, dims, blk.b0);
    const Heads<T> O = seq_heads(out, dims, blk.b0);
    for (int64_t c = 0; c < chunk_count(Tn, s.causal); ++c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      heads_gemm<T>(blk.rows(), h, false, false, ch.r1 - ch.r0, dk, ch.keys, Pb.rows_from(ch.r0), V,
                    O.rows_from(ch.r0));
    }
    if (gates) gate_heads(out, dims, blk, gates);
  }
}

// dout -> dP = gate dout V^T on the visible keys (0 elsewhere), dV = P^T (gate
// dout), and per (batch, head) <dout, P V> for the gates.
template <class T>
void apply_bwd(const T* dout, const T* P, const T* v, T* dP, T* dv, const Dims& dims, const AttentionShape& s,
               const T* gates, double* dgate_part) {
  const int64_t Tn = dims.T, dk = dims.dk, h = dims.h;
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    Heads<const T> dO = seq_heads(dout, dims, blk.b0);
    if (gates) dO = gated_dout(dout, dims, blk, gates);
    const Heads<const T> V = seq_heads(v, dims, blk.b0), Pb = score_heads(P, dims, blk.b0);
    const Heads<T> G = score_heads(dP, dims, blk.b0), dV = seq_heads(dv, dims, blk.b0);
    const int64_t chunks = chunk_count(Tn, s.causal);
    for (int64_t c = chunks - 1; c >= 0; --c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      const T beta = c == chunks - 1 ? T(0) : T(1);
      heads_gemm<T>(nb, h, false, true, rows, ch.keys, dk, dO.rows_from(ch.r0), V, G.rows_from(ch.r0));
      heads_gemm<T>(nb, h, true, false, ch.keys, dk, rows, Pb.rows_from(ch.r0), dO.rows_from(ch.r0), dV, T(1), beta);
    }
    mask_rows(dP, dims, s.causal, nullptr, T(0), blk.b0 * h, blk.b1 * h);
    if (dgate_part) gate_grads(dout, Pb, V, dims, blk, dgate_part);
  }
}

}  // namespace

Tensor attention_scores_forward(const Tensor& q, const Tensor& k, const AttentionShape& shape,
                                const Tensor& key_padding) {
  const Dims dims = check_qkv(q, k, k, shape, "attention_scores_forward");
  const std::vector<unsigned char> real = real_keys(key_padding, dims);
  Tensor S = Tensor::empty({dims.B, dims.h, dims.T, dims.T}, q.dtype());
  if (S.numel() == 0) return S;
  if (dims.dk == 0) {
    S.fill_(0.0);
    return S;
  }
  const Tensor qc = q.contiguous(), kc = k.contiguous();
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scores_fwd<T>(qc.data<T>(), kc.data<T>(), S.data<T>(), dims, shape, real.empty() ? nullptr : real.data());
  });
  return S;
}

ScoresGrads attention_scores_backward(const Tensor& dscores, const Tensor& q, const Tensor& k,
                                      const AttentionShape& shape, const Tensor& key_padding) {
  const Dims dims = check_qkv(q, k, k, shape, "attention_scores_backward");
  const std::vector<unsigned char> real = real_keys(key_padding, dims);
  ScoresGrads g{Tensor::zeros(q.shape(), q.dtype()), Tensor::zeros(q.shape(), q.dtype())};
  if (q.numel() == 0) return g;
  const Tensor dc = dscores.contiguous(), qc = q.contiguous(), kc = k.contiguous();
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // The masked entries are constants: no gradient flows through them.
    const std::vector<T> masked = hide<T>(dc.data<T>(), dims, shape.causal, real.empty() ? nullptr : real.data());
    scores_bwd<T>(masked.data(), qc.data<T>(), kc.data<T>(), g.dq.data<T>(), g.dk.data<T>(), dims, shape);
  });
  return g;
}

Tensor attention_softmax_forward(const Tensor& scores, bool causal) {
  check_square(scores, "attention_softmax_forward");
  const Tensor sc = scores.contiguous();
  Tensor P = Tensor::empty(sc.shape(), sc.dtype());
  dispatch(sc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_fwd<T>(sc.data<T>(), P.data<T>(), sc.size(0) * sc.size(1), sc.size(2), causal);
  });
  return P;
}

Tensor attention_softmax_backward(const Tensor& dprobs, const Tensor& probs, bool causal) {
  check_square(probs, "attention_softmax_backward");
  const Tensor dc = dprobs.contiguous(), pc = probs.contiguous();
  Tensor dS = Tensor::empty(pc.shape(), pc.dtype());
  dispatch(pc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_bwd<T>(dc.data<T>(), pc.data<T>(), dS.data<T>(), pc.size(0) * pc.size(1), pc.size(2), causal);
  });
  return dS;
}

Tensor attention_apply_forward(const Tensor& probs, const Tensor& v, const AttentionShape& shape, const Tensor& gates) {
  const char* op = "attention_apply_forward";
  const Dims dims = probs_dims(probs, v, shape, op);
  check_gates(gates, dims, v.dtype(), op);
  Tensor out = Tensor::empty(v.shape(), v.dtype());
  if (v.numel() == 0) return out;
  const Tensor pc = probs.contiguous(), vc = v.contiguous();
  const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
  dispatch(v.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Keys after the query stay hidden whatever a hook put there (the fused
    // softmax leaves exact zeros there, so this changes no bit).
    const std::vector<T> visible_p = hide<T>(pc.data<T>(), dims, shape.causal, nullptr);
    apply_fwd<T>(visible_p.data(), vc.data<T>(), out.data<T>(), dims, shape, gc.defined() ? gc.data<T>() : nullptr);
  });
  return out;
}

ApplyGrads attention_apply_backward(const Tensor& dout, const Tensor& probs, const Tensor& v,
                                    const AttentionShape& shape, const Tensor& gates, bool want_dgates) {
  const char* op = "attention_apply_backward";
  const Dims dims = probs_dims(probs, v, shape, op);
  check_gates(gates, dims, v.dtype(), op);
  ApplyGrads g{Tensor::zeros(probs.shape(), v.dtype()), Tensor::zeros(v.shape(), v.dtype()), Tensor()};
  std::vector<double> part(want_dgates ? static_cast<std::size_t>(dims.pairs()) : 0, 0.0);
  if (v.numel() > 0) {
    const Tensor dc = dout.contiguous(), pc = probs.contiguous(), vc = v.contiguous();
    const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
    dispatch(v.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> visible_p = hide<T>(pc.data<T>(), dims, shape.causal, nullptr);
      apply_bwd<T>(dc.data<T>(), visible_p.data(), vc.data<T>(), g.dprobs.data<T>(), g.dv.data<T>(), dims, shape,
                   gc.defined() ? gc.data<T>() : nullptr, want_dgates ? part.data() : nullptr);
    });
  }
  if (want_dgates) {
    std::vector<double> sums(static_cast<std::size_t>(dims.h), 0.0);
    for (int64_t pair = 0; pair < dims.pairs(); ++pair)
      sums[static_cast<std::size_t>(pair % dims.h)] += part[static_cast<std::size_t>(pair)];
    g.dgates = Tensor::from_vector(sums, {dims.h}, v.dtype());
  }
  return g;
}

}  // namespace headlab::core

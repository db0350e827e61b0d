// Fused multi-head attention, forward and backward. See attention_kernels.h
// for the shapes and the contract.
#include "core/attention_kernels.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/blas.h"
#include "core/softmax_row.h"
#include "core/threads.h"

namespace headlab::core {
namespace {


struct Dims {
  int64_t B = 0, T = 0, d = 0, h = 1, dk = 0;
  int64_t pairs() const { return B * h; }
  // Element (b, 0, head * dk) of a [B, T, d] tensor: head `head`'s [T, dk]
  // block of batch b, rows d apart.
  int64_t block(int64_t pair) const { return (pair / h) * T * d + (pair % h) * dk; }
  // Threads pay off once the pairs hold real GEMM work.
  bool parallel() const { return pairs() > 1 && pairs() * T * T * dk >= kParallelGemmWork; }
};

Dims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& s, const char* op) {
  for (const Tensor* t : {&q, &k, &v})
    if (!t->defined()) throw std::invalid_argument(std::string(op) + ": q, k and v must be defined");
  if (q.dim() != 3 || k.shape() != q.shape() || v.shape() != q.shape())
    throw std::invalid_argument(std::string(op) + ": q, k and v must share one shape [B, T, d], got " +
                                to_string(q.shape()) + ", " + to_string(k.shape()) + " and " + to_string(v.shape()));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": q, k and v must share one dtype");
  Dims dims{q.size(0), q.size(1), q.size(2), s.heads, 0};
  if (s.heads <= 0 || dims.d % s.heads != 0)
    throw std::invalid_argument(std::string(op) + ": d = " + std::to_string(dims.d) + " is not divisible by heads = " +
                                std::to_string(s.heads));
  dims.dk = dims.d / s.heads;
  return dims;
}

void check_gates(const Tensor& gates, const Dims& dims, DType dtype, const char* op) {
  if (gates.defined() && (gates.shape() != Shape{dims.h} || gates.dtype() != dtype))
    throw std::invalid_argument(std::string(op) + ": gates must be [" + std::to_string(dims.h) + "] " +
                                to_string(dtype) + ", got " + to_string(gates.shape()) + " " +
                                to_string(gates.dtype()));
}

// 1 per real key, [B * T]; empty when there is no padding mask.
std::vector<unsigned char> real_keys(const Tensor& key_padding, const Dims& dims) {
  if (!key_padding.defined()) return {};
  if (key_padding.shape() != Shape{dims.B, dims.T})
    throw std::invalid_argument("attention_forward: key padding mask " + to_string(key_padding.shape()) +
                                " does not match [B, T] = " + to_string(Shape{dims.B, dims.T}));
  const std::vector<double> values = key_padding.to_vector();
  std::vector<unsigned char> real(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) real[i] = values[i] != 0.0;
  return real;
}

// Causal attention runs its query rows in chunks of this many: a chunk's
// queries see only the keys up to its last row, so the products skip the
// hidden blocks above the diagonal (a quarter of the work at T = 128, three
// eighths at 256). Shorter sequences are one chunk.
constexpr int64_t kCausalChunk = 64;

// Rows [r0, r1) of a chunk, and the keys they can see.
struct Chunk {
  int64_t r0, r1, keys;
};
Chunk chunk_of(int64_t c, int64_t Tn, bool causal) {
  const int64_t size = causal ? kCausalChunk : Tn;
  const int64_t r0 = c * size, r1 = std::min(Tn, r0 + size);
  return {r0, r1, causal ? r1 : Tn};
}
int64_t chunk_count(int64_t Tn, bool causal) { return causal ? (Tn + kCausalChunk - 1) / kCausalChunk : 1; }

// The pairs are dealt out as blocks of whole sequences, batch rows
// [b0, b1) with all their heads, so that each GEMM is one batched call over
// the block's (batch, head) grid: per-call overhead is paid once per block,
// not per pair. The blocks depend on the shape alone (never on the thread
// count), and each is computed whole by one thread.
constexpr int64_t kMaxAttentionBlocks = 8;
struct Block {
  int64_t b0, b1;
  int64_t rows() const { return b1 - b0; }
};
int64_t block_count(const Dims& dims) { return dims.parallel() ? std::min(dims.B, kMaxAttentionBlocks) : 1; }
Block block_of(int64_t i, int64_t count, int64_t B) { return {i * B / count, (i + 1) * B / count}; }

// One matrix per (batch row, head) of a block: the first at p, the next
// batch row s0 further, the next head s1 further, rows ld apart.
template <class T>
struct Heads {
  T* p;
  int64_t ld, s0, s1;
  Heads<T> rows_from(int64_t r) const { return {p + r * ld, ld, s0, s1}; }
};

// C_(b,h) = alpha op(A_(b,h)) op(B_(b,h)) + beta C_(b,h) for the block's
// `nb` batch rows and `h` heads, on the calling thread.
template <class T>
void heads_gemm(int64_t nb, int64_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, Heads<const T> a,
                Heads<const T> b, Heads<T> c, T alpha = T(1), T beta = T(0)) {
  const detail::BatchedGemm<T> g{.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .outer = nb, .inner = h,
                                 .a = a.p, .lda = a.ld, .a_stride = {a.s0, a.s1},
                                 .b = b.p, .ldb = b.ld, .b_stride = {b.s0, b.s1},
                                 .c = c.p, .ldc = c.ld, .c_stride = {c.s0, c.s1}, .alpha = alpha, .beta = beta};
  detail::batched_gemm(g);
}

// A [B, T, d] tensor's heads from batch row b0: [T, dk] blocks, rows d apart.
template <class T>
Heads<T> seq_heads(T* base, const Dims& dims, int64_t b0) {
  return {base + b0 * dims.T * dims.d, dims.d, dims.T * dims.d, dims.dk};
}
// A [B, h, T, T] tensor's heads from batch row b0.
template <class T>
Heads<T> score_heads(T* base, const Dims& dims, int64_t b0) {
  return {base + b0 * dims.h * dims.T * dims.T, dims.T, dims.h * dims.T * dims.T, dims.T * dims.T};
}
template <class T>
Heads<const T> in(Heads<T> x) {
  return {x.p, x.ld, x.s0, x.s1};
}

// A per-thread buffer of at least `n` elements, kept from call to call (no
// allocation per step).
template <class T>
T* scratch(std::size_t n, int which) {
  thread_local std::vector<T> buffers[3];
  std::vector<T>& b = buffers[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// q, k, v, out [B, T, d]; P [B, h, T, T].
template <class T>
void attention_fwd(const T* q, const T* k, const T* v, T* out, T* P, const Dims& dims, const AttentionShape& s,
                   const unsigned char* real, const T* gates) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk, h = dims.h;
  const T scale = static_cast<T>(s.scale);
  const int64_t blocks = block_count(dims);
#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)
  for (int64_t bi = 0; bi < blocks; ++bi) {
    const Block blk = block_of(bi, blocks, dims.B);
    const int64_t nb = blk.rows();
    const Heads<const T> Q = seq_heads(q, dims, blk.b0), K = seq_heads(k, dims, blk.b0), V = seq_heads(v, dims, blk.b0);
    const Heads<T> Pb = score_heads(P, dims, blk.b0), O = seq_heads(out, dims, blk.b0);
    for (int64_t c = 0; c < chunk_count(Tn, s.causal); ++c) {
      const Chunk ch = chunk_of(c, Tn, s.causal);
      const int64_t rows = ch.r1 - ch.r0;
      // S = scale Q K^T: rows r0..r1, keys 0..keys.
      heads_gemm<T>(nb, h, false, true, rows, ch.keys, dk, Q.rows_from(ch.r0), K, Pb.rows_from(ch.r0), scale);
      for (int64_t pair = blk.b0 * h; pair < blk.b1 * h; ++pair) {
        const unsigned char* real_b = real ? real + (pair / h) * Tn : nullptr;
        for (int64_t i = ch.r0; i < ch.r1; ++i) {
          T* row = P + pair * Tn * Tn + i * Tn;
          const int64_t n = s.causal ? i + 1 : Tn;  // keys the causal mask lets through
          // Rounded up to whole 16-float vectors within the row, the extra keys
          // set to -inf: the softmax loops then need no scalar remainder, and
          // those keys come out as exact zeros like every hidden key.
          const int64_t padded = std::min(Tn, (n + 15) / 16 * 16);
          std::fill(row + n, row + padded, -std::numeric_limits<T>::infinity());
          if (real_b)
            for (int64_t j = 0; j < n; ++j)
              if (!real_b[j]) row[j] = -std::numeric_limits<T>::infinity();
          double row_max = 0.0, sum = 0.0;
          detail::softmax_row(row, row, padded, row_max, sum);  // all hidden: zeros
          std::fill(row + padded, row + Tn, T(0));
        }
      }
      // P V: rows r0..r1 [rows, dk].
      heads_gemm<T>(nb, h, false, false, rows, dk, ch.keys, in(Pb.rows_from(ch.r0)), V, O.rows_from(ch.r0));
    }
    if (gates)
      for (int64_t b = blk.b0; b < blk.b1; ++b)
        for (int64_t head = 0; head < h; ++head) {
          const T g = gates[head];
          if (g == T(1)) continue;
          T* o = out + b * Tn * d + head * dk;
          for (int64_t i = 0; i < Tn; ++i)
#pragma omp simd
            for (int64_t j = 0; j < dk; ++j) o[i * d + j] *= g;
        }
  }
}

// dout, q, k, v, dq, dk, dv [B, T, d]; P [B, h, T, T]; dgate_part [B * h] or null.
template <class T>
void attention_bwd(const T* dout, const T* q, const T* k, const T* v, const T* P, T* dq, T* dk_out, T* dv,
                   const Dims& dims, const AttentionShape& s, const T* gates, double* dgate_part) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk, h = dims.h;
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
    if (gated) {
      // dO' = gate * dout: the gradient reaching P V.
      T* g_out = scratch<T>(static_cast<std::size_t>(nb * Tn * d), 1);
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t i = 0; i < Tn; ++i)
          for (int64_t head = 0; head < h; ++head) {
            const T g = gates[head];
            const T* src = dout + ((blk.b0 + b) * Tn + i) * d + head * dk;
            T* dst = g_out + (b * Tn + i) * d + head * dk;
#pragma omp simd
            for (int64_t j = 0; j < dk; ++j) dst[j] = src[j] * g;
          }
      dO = in(seq_heads(g_out, dims, 0));
    }
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
      // Softmax backward, then the scale: dS = scale * P * (dP - rowsum(dP * P)).
      // Hidden keys have P = 0, so their gradient is 0 without a mask.
      for (int64_t pair = 0; pair < nb * h; ++pair)
        for (int64_t i = ch.r0; i < ch.r1; ++i) {
          const T* pr = P + (blk.b0 * h + pair) * Tn * Tn + i * Tn;
          T* sr = dS.p + pair * Tn * Tn + i * Tn;
          const int64_t n = s.causal ? i + 1 : Tn;
          T dt = 0;
#pragma omp simd reduction(+ : dt)
          for (int64_t j = 0; j < n; ++j) dt += sr[j] * pr[j];
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) sr[j] = pr[j] * (sr[j] - dt) * scale;
          std::fill(sr + n, sr + ch.keys, T(0));
        }
      heads_gemm<T>(nb, h, false, false, rows, dk, ch.keys, in(dSc), K, dQ.rows_from(ch.r0));       // dQ = dS K
      heads_gemm<T>(nb, h, true, false, ch.keys, dk, rows, in(dSc), Q.rows_from(ch.r0), dK, T(1), beta);  // dK += dS^T Q
    }
    if (dgate_part) {
      // d gate = <dout, P V> over each pair's block; P V is recomputed, [nb, T, d].
      T* pv = scratch<T>(static_cast<std::size_t>(nb * Tn * d), 2);
      heads_gemm<T>(nb, h, false, false, Tn, dk, Tn, Pb, V, seq_heads(pv, dims, 0));
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t head = 0; head < h; ++head) {
          double sum = 0.0;
          for (int64_t i = 0; i < Tn; ++i)
            for (int64_t j = 0; j < dk; ++j)
              sum += static_cast<double>(dout[((blk.b0 + b) * Tn + i) * d + head * dk + j]) *
                     static_cast<double>(pv[(b * Tn + i) * d + head * dk + j]);
          dgate_part[(blk.b0 + b) * h + head] = sum;
        }
    }
  }
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& shape,
                                   const Tensor& key_padding, const Tensor& gates) {
  const char* op = "attention_forward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  const std::vector<unsigned char> real = real_keys(key_padding, dims);
  AttentionForward r{Tensor::empty(q.shape(), q.dtype()), Tensor::empty({dims.B, dims.h, dims.T, dims.T}, q.dtype())};
  if (q.numel() == 0) {  // no queries, or d = 0: nothing to attend with
    r.probs.fill_(0.0);
    return r;
  }
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const Tensor gc = gates.defined() ? gates.contiguous() : Tensor();
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    attention_fwd<T>(qc.data<T>(), kc.data<T>(), vc.data<T>(), r.out.data<T>(), r.probs.data<T>(), dims, shape,
                     real.empty() ? nullptr : real.data(), gc.defined() ? gc.data<T>() : nullptr);
  });
  return r;
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionShape& shape, const Tensor& gates,
                                  bool want_dgates) {
  const char* op = "attention_backward";
  const Dims dims = check_qkv(q, k, v, shape, op);
  check_gates(gates, dims, q.dtype(), op);
  if (!dout.defined() || dout.shape() != q.shape() || dout.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": dout must be like q, " + to_string(q.shape()));
  if (!probs.defined() || probs.shape() != Shape{dims.B, dims.h, dims.T, dims.T} || probs.dtype() != q.dtype())
    throw std::invalid_argument(std::string(op) + ": probs must be [B, h, T, T] = " +
                                to_string(Shape{dims.B, dims.h, dims.T, dims.T}) + " of q's dtype");
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(q.shape(), q.dtype()),
                   Tensor::empty(q.shape(), q.dtype()), Tensor()};
  std::vector<double> part(want_dgates ? static_cast<std::size_t>(dims.pairs()) : 0, 0.0);
  if (q.numel() > 0) {
    const Tensor dc = dout.contiguous(), qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    const Tensor pc = probs.contiguous(), gc = gates.defined() ? gates.contiguous() : Tensor();
    dispatch(q.dtype(), [&](auto tag) {
      using T = decltype(tag);
      attention_bwd<T>(dc.data<T>(), qc.data<T>(), kc.data<T>(), vc.data<T>(), pc.data<T>(), g.dq.data<T>(),
                       g.dk.data<T>(), g.dv.data<T>(), dims, shape, gc.defined() ? gc.data<T>() : nullptr,
                       want_dgates ? part.data() : nullptr);
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

}  // namespace headlab::core

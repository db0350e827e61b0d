// Internal: the blocking shared by the fused attention kernels
// (attention_kernels.cpp) and their three-stage form (attention_split.cpp),
// so that both run the same GEMM calls on the same rows and get the same
// bits. Shapes and contract: attention_kernels.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/attention_kernels.h"
#include "core/blas.h"
#include "core/softmax_row.h"
#include "core/threads.h"

namespace headlab::core::attention_detail {

struct Dims {
  int64_t B = 0, T = 0, d = 0, h = 1, dk = 0;
  int64_t pairs() const { return B * h; }
  // Element (b, 0, head * dk) of a [B, T, d] tensor: head `head`'s [T, dk]
  // block of batch b, rows d apart.
  int64_t block(int64_t pair) const { return (pair / h) * T * d + (pair % h) * dk; }
  // Threads pay off once the pairs hold real GEMM work.
  bool parallel() const { return pairs() > 1 && pairs() * T * T * dk >= kParallelGemmWork; }
};

inline Dims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionShape& s, const char* op) {
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

inline void check_gates(const Tensor& gates, const Dims& dims, DType dtype, const char* op) {
  if (gates.defined() && (gates.shape() != Shape{dims.h} || gates.dtype() != dtype))
    throw std::invalid_argument(std::string(op) + ": gates must be [" + std::to_string(dims.h) + "] " +
                                to_string(dtype) + ", got " + to_string(gates.shape()) + " " +
                                to_string(gates.dtype()));
}

// 1 per real key, [B * T]; empty when there is no padding mask.
inline std::vector<unsigned char> real_keys(const Tensor& key_padding, const Dims& dims) {
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
inline Chunk chunk_of(int64_t c, int64_t Tn, bool causal) {
  const int64_t size = causal ? kCausalChunk : Tn;
  const int64_t r0 = c * size, r1 = std::min(Tn, r0 + size);
  return {r0, r1, causal ? r1 : Tn};
}
inline int64_t chunk_count(int64_t Tn, bool causal) { return causal ? (Tn + kCausalChunk - 1) / kCausalChunk : 1; }

// The pairs are dealt out as blocks of whole sequences, batch rows
// [b0, b1) with all their heads, so that each GEMM is one batched call over
// the block's (batch, head) grid: per-call overhead is paid once per block,
// not per pair. The blocks depend on the shape alone (never on the thread
// count), and each is computed whole by one thread. At most 8 of them,
// unless a block's chunk of scores ([nb, h, rows, keys], with the
// probabilities and their copies beside it) would exceed kBlockScores: then
// more, down to one sequence a block, so that those buffers stay within L2.
// At the medium preset's shape (8 heads, 128 tokens, 16 sequences) that is
// 16 blocks of one sequence, 2% off its step in f32 and bf16; fewer, larger
// blocks stay as they were, for a block's calls cost more than its buffers
// there (tiny's step was 2-5% slower with 16). Each pair's products are the
// same calls either way: the bits do not change.
constexpr int64_t kMaxAttentionBlocks = 8;
constexpr int64_t kBlockScores = int64_t{1} << 16;
struct Block {
  int64_t b0, b1;
  int64_t rows() const { return b1 - b0; }
};
inline int64_t block_count(const Dims& dims) {
  if (!dims.parallel()) return 1;
  const int64_t chunk_scores = dims.h * std::min(dims.T, kCausalChunk) * dims.T;  // one sequence's
  int64_t count = std::min(dims.B, kMaxAttentionBlocks);
  while (count < dims.B && (dims.B + count - 1) / count * chunk_scores > kBlockScores) ++count;
  return count;
}
inline Block block_of(int64_t i, int64_t count, int64_t B) { return {i * B / count, (i + 1) * B / count}; }

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

// Row i of a chunk: its scores -> its probabilities. The `n` visible keys
// of `s` (length at least the row rounded up to whole 16-float vectors,
// within Tn) are scaled (the scale after the GEMM, not as its alpha: an
// output scale takes oneDNN off its fastest kernels on some CPUs, and
// round(scale * acc) is the same either way), padded keys hidden; then the
// softmax into `p` (length Tn; `p` may be `s`). The extra keys of the
// rounding up are -inf, so the softmax loops need no scalar remainder and
// those keys come out as exact zeros like every hidden key.
template <class T>
void scores_row_to_probs(T* s, T* p, int64_t n, int64_t Tn, T scale, const unsigned char* real_b) {
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  const int64_t padded = std::min(Tn, (n + 15) / 16 * 16);
  T m = kHidden;
  if (std::is_same_v<T, float> && real_b == nullptr && padded <= detail::kShortRow) {
    // A short row (T <= 8) in a fixed-length loop: vectorized whole, where
    // the loop below leaves it all to its scalar remainder. A max does not
    // depend on the order it is taken in: the same m.
    T v[detail::kShortRow];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < detail::kShortRow; ++j) {
      v[j] = j < n ? s[j] * scale : kHidden;
      m = v[j] > m ? v[j] : m;
    }
    std::copy_n(v, padded, s);
  } else if (real_b == nullptr) {  // scaled, padded and the max in one pass: the row is short, the passes add up
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < padded; ++j) {
      const T v = j < n ? s[j] * scale : kHidden;
      s[j] = v;
      m = v > m ? v : m;
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= scale;
    std::fill(s + n, s + padded, kHidden);
    for (int64_t j = 0; j < n; ++j)
      if (!real_b[j]) s[j] = kHidden;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < padded; ++j) m = s[j] > m ? s[j] : m;
  }
  double sum = 0.0;
  detail::softmax_row_from_max(s, p, padded, m, sum);  // all hidden: zeros
  std::fill(p + padded, p + Tn, T(0));
}

// The softmax backward of one row, then the scale, in place over the
// row's dP (length `keys`): dS = scale * P * (dP - rowsum(dP * P)) on the
// n visible keys, 0 on the rest. Hidden keys have P = 0, so their gradient
// is 0 without a mask.
//
// dt of a row shorter than kShortRow (attention's rows at T <= 8) is the
// sum the simd loop makes of it in an optimized build, in its order, without
// the loop's lanes: the whole row is the loop's scalar remainder, which adds
// each product into lane 0 with a multiply-add, and the lanes (all 0 but
// that one) are then added in order from 0. The lanes' pass cost more than
// the row. That holds on any build whose vectors hold 8 floats or more.
template <class T>
void probs_row_grad(T* row, const T* p, int64_t n, int64_t keys, T scale) {
  T dt = 0;
  if (std::is_same_v<T, float> && n < detail::kShortRow) {
    T lane0 = 0;
    for (int64_t j = 0; j < n; ++j) lane0 = std::fma(row[j], p[j], lane0);
    dt = T(0) + lane0;
  } else {
#pragma omp simd reduction(+ : dt)
    for (int64_t j = 0; j < n; ++j) dt += row[j] * p[j];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] = p[j] * (row[j] - dt) * scale;
  std::fill(row + n, row + keys, T(0));
}

// A per-thread buffer of at least `n` elements, kept from call to call (no
// allocation per step): `which` is 0-6 (a float kernel uses 0-2; the bf16
// one, attention_bf16.cpp, 0-3 of float and 0-6 of bf16_t).
template <class T>
T* scratch(std::size_t n, int which) {
  thread_local std::vector<T> buffers[7];
  std::vector<T>& b = buffers[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// out [B, T, d]: head i's columns of the block's batch rows times gates[i]
// (a gate of 1 is skipped: no bit changes).
template <class T>
void gate_heads(T* out, const Dims& dims, const Block& blk, const T* gates) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk;
  for (int64_t b = blk.b0; b < blk.b1; ++b)
    for (int64_t head = 0; head < dims.h; ++head) {
      const T g = gates[head];
      if (g == T(1)) continue;
      T* o = out + b * Tn * d + head * dk;
      for (int64_t i = 0; i < Tn; ++i)
#pragma omp simd
        for (int64_t j = 0; j < dk; ++j) o[i * d + j] *= g;
    }
}

// dO' = gate * dout for the block's batch rows [nb, T, d], in scratch buffer
// 1: the gradient reaching P V.
template <class T>
Heads<const T> gated_dout(const T* dout, const Dims& dims, const Block& blk, const T* gates) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk;
  T* g_out = scratch<T>(static_cast<std::size_t>(blk.rows() * Tn * d), 1);
  for (int64_t b = 0; b < blk.rows(); ++b)
    for (int64_t i = 0; i < Tn; ++i)
      for (int64_t head = 0; head < dims.h; ++head) {
        const T g = gates[head];
        const T* src = dout + ((blk.b0 + b) * Tn + i) * d + head * dk;
        T* dst = g_out + (b * Tn + i) * d + head * dk;
#pragma omp simd
        for (int64_t j = 0; j < dk; ++j) dst[j] = src[j] * g;
      }
  return in(seq_heads(g_out, dims, 0));
}

// d gate = <dout, P V> over each (batch row, head) of the block, into
// dgate_part [B * h]; P V is recomputed in scratch buffer 2, [nb, T, d].
template <class T>
void gate_grads(const T* dout, Heads<const T> P, Heads<const T> V, const Dims& dims, const Block& blk,
                double* dgate_part) {
  const int64_t Tn = dims.T, d = dims.d, dk = dims.dk, h = dims.h;
  T* pv = scratch<T>(static_cast<std::size_t>(blk.rows() * Tn * d), 2);
  heads_gemm<T>(blk.rows(), h, false, false, Tn, dk, Tn, P, V, seq_heads(pv, dims, 0));
  for (int64_t b = 0; b < blk.rows(); ++b)
    for (int64_t head = 0; head < h; ++head) {
      double sum = 0.0;
      for (int64_t i = 0; i < Tn; ++i)
        for (int64_t j = 0; j < dk; ++j)
          sum += static_cast<double>(dout[((blk.b0 + b) * Tn + i) * d + head * dk + j]) *
                 static_cast<double>(pv[(b * Tn + i) * d + head * dk + j]);
      dgate_part[(blk.b0 + b) * h + head] = sum;
    }
}

}  // namespace headlab::core::attention_detail

// float32 GEMMs in bf16 mixed precision: see core/gemm.h.
//
// A and B are rounded into this thread's bf16 buffers, each operand packed
// densely in the layout it had (a transposed operand stays transposed, with
// its leading dimension now its width; a batch's products follow one
// another), then the backend multiplies the bf16 operands with f32
// accumulation into the caller's f32 C, strides and alpha / beta unchanged.
// Dense operands are also what puts oneDNN's matmul on its brgemm kernels.
//
// The conversion is a pass over each operand: it reads 4 bytes and writes 2
// per element, against the 2 k (m or n) FLOPs each element takes part in.
// Inside a Bf16Operands scope (the training step) a Linear's input and
// weight are rounded once for all the products that read them
// (core/bf16_operands.h); docs/performance.md measures what is left.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "core/bf16.h"
#include "core/bf16_operands.h"
#include "core/blas.h"
#include "core/cpu_features.h"
#include "core/gemm.h"

namespace headlab::core {
namespace {

// One row of n floats -> n bf16, 32 at a time by vcvtne2ps2bf16 (one
// instruction where the portable to_bf16 takes about eight), the tail masked.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void row_avx512_bf16(const float* in, bf16_t* out,
                                                                                      int64_t n) {
  int64_t c = 0;
  for (; c + 32 <= n; c += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + c + 16), _mm512_loadu_ps(in + c));
    _mm512_storeu_si512(out + c, reinterpret_cast<const __m512i&>(v));
  }
  for (; c < n; c += 16) {
    const __mmask16 mask = n - c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - c)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, in + c));
    _mm256_mask_storeu_epi16(out + c, mask, reinterpret_cast<const __m256i&>(v));
  }
}

void row_portable(const float* in, bf16_t* out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = to_bf16(in[c]);
}

}  // namespace

void pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, bf16_t* dst) {
  static const auto row = cpu_has_avx512_bf16() ? row_avx512_bf16 : row_portable;
  for (int64_t r = 0; r < rows; ++r) row(src + r * ld, dst + r * cols, cols);
}

namespace detail {
namespace {

// One operand of a batch, [rows, cols] in memory per product (the
// transposed shape when transposed), packed product after product.
const bf16_t* pack_operand(std::vector<bf16_t>& buffer, const float* base, int64_t rows, int64_t cols, int64_t ld,
                           int64_t outer, int64_t inner, const int64_t* strides) {
  const int64_t each = rows * cols;
  const auto total = static_cast<std::size_t>(each * outer * inner);
  if (buffer.size() < total) buffer.resize(total);
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t j = 0; j < inner; ++j)
      pack_bf16(base + i * strides[0] + j * strides[1], rows, cols, ld, buffer.data() + (i * inner + j) * each);
  return buffer.data();
}

}  // namespace

void bf16_batched_gemm(const BatchedGemm<float>& g, GemmBackend backend) {
  // Per thread: GEMMs run on many threads at once, each on its own block.
  thread_local std::vector<bf16_t> a_buffer, b_buffer;
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  BatchedGemm<bf16_t> h{.ta = g.ta, .tb = g.tb, .m = g.m, .n = g.n, .k = g.k, .outer = g.outer, .inner = g.inner};
  h.a = pack_operand(a_buffer, g.a, a_rows, a_cols, g.lda, g.outer, g.inner, g.a_stride);
  h.lda = a_cols;
  h.a_stride[0] = g.inner * a_rows * a_cols;
  h.a_stride[1] = a_rows * a_cols;
  h.b = pack_operand(b_buffer, g.b, b_rows, b_cols, g.ldb, g.outer, g.inner, g.b_stride);
  h.ldb = b_cols;
  h.b_stride[0] = g.inner * b_rows * b_cols;
  h.b_stride[1] = b_rows * b_cols;
  h.ldc = g.ldc;
  std::copy(g.c_stride, g.c_stride + 2, h.c_stride);
  h.bias = g.bias;
  if (backend == GemmBackend::onednn) onednn_batched_gemm_bf16(h, g.alpha, g.beta, g.c);
  else openblas_batched_gemm_bf16(h, g.alpha, g.beta, g.c);
}

void widened_bf16_gemm(const BatchedGemm<bf16_t>& g, float alpha, float beta, float* c, GemmBackend backend) {
  // Per thread, as the packed operands. An operand may be a block of a
  // larger packed one (core/blas.h hands out row or column blocks), so what
  // is widened is its whole extent, from its first element to its last, gaps
  // between its rows included: the strides stay valid.
  thread_local std::vector<float> a_wide, b_wide;
  const auto widen = [&g](std::vector<float>& out, const bf16_t* in, int64_t rows, int64_t cols, int64_t ld,
                          const int64_t* strides) {
    const int64_t count = (g.outer - 1) * strides[0] + (g.inner - 1) * strides[1] + (rows - 1) * ld + cols;
    if (out.size() < static_cast<std::size_t>(count)) out.resize(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = from_bf16(in[i]);
    return out.data();
  };
  BatchedGemm<float> f{.ta = g.ta, .tb = g.tb, .m = g.m, .n = g.n, .k = g.k, .outer = g.outer, .inner = g.inner};
  f.a = widen(a_wide, g.a, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda, g.a_stride);
  f.lda = g.lda;
  std::copy(g.a_stride, g.a_stride + 2, f.a_stride);
  f.b = widen(b_wide, g.b, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb, g.b_stride);
  f.ldb = g.ldb;
  std::copy(g.b_stride, g.b_stride + 2, f.b_stride);
  f.c = c;
  f.ldc = g.ldc;
  std::copy(g.c_stride, g.c_stride + 2, f.c_stride);
  f.alpha = alpha;
  f.beta = beta;
  f.bias = g.bias;
  batched_gemm_on(f, backend);
}

void packed_bf16_gemm(const BatchedGemm<bf16_t>& product, float alpha, float beta, float* c) {
  if (product.m <= 0 || product.n <= 0) return;
  if (gemm_recording()) return record_packed_bf16_gemm(product, alpha, beta, c);  // core/gemm_replay.h
  BatchedGemm<bf16_t> g = product;
  if (g.k <= 0) {  // nothing to multiply: C = beta C (+ bias), as BLAS defines it
    bias_as_beta(g, alpha, beta, c);
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t p = 0; p < g.inner; ++p) {
        float* cp = c + o * g.c_stride[0] + p * g.c_stride[1];
        for (int64_t i = 0; i < g.m; ++i)
          for (int64_t j = 0; j < g.n; ++j) cp[i * g.ldc + j] = beta == 0.0f ? 0.0f : beta * cp[i * g.ldc + j];
      }
    return;
  }
  if (gemm_backend() == GemmBackend::onednn) onednn_batched_gemm_bf16(g, alpha, beta, c);
  else openblas_batched_gemm_bf16(g, alpha, beta, c);
}

namespace {

// A call's operand (A, or B when `b`) as stored: [rows, cols] with leading dimension ld.
StoredOperand stored(const GemmCall<float>& c, bool b) {
  if (!b) return {c.a, c.ta ? c.k : c.m, c.ta ? c.m : c.k, c.lda};
  return {c.b, c.tb ? c.n : c.k, c.tb ? c.k : c.n, c.ldb};
}

// Whether operand i of `calls` is the A of a product that oneDNN runs split
// by rows of op(A): A's block is then what run_block can round by itself.
bool split_a(std::initializer_list<GemmCall<float>> calls, std::size_t i) {
  const GemmCall<float>& c = calls.begin()[i / 2];
  return i % 2 == 0 && gemm_backend() == GemmBackend::onednn && c.by_rows() && c.m > 0 && c.n > 0 && c.k > 0 &&
         c.blocks() > 1;
}

}  // namespace

PackedOperands pack_operands(std::initializer_list<GemmCall<float>> calls) {
  if (calls.size() > kMaxGemmCalls) throw std::logic_error("parallel_gemms: more than kMaxGemmCalls products");
  thread_local std::array<std::vector<bf16_t>, 2 * kMaxGemmCalls> buffers;
  PackedOperands packed;
  packed.count = calls.size();
  std::array<const bf16_t*, 2 * kMaxGemmCalls> at{};
  for (std::size_t i = 0; i < 2 * packed.count; ++i) {
    const GemmCall<float>& call = calls.begin()[i / 2];
    const StoredOperand mine = stored(call, i % 2 == 1);
    packed.same[i] = i;
    if (const bf16_t* given = i % 2 == 1 ? call.b_rounded : call.a_rounded) {  // rounded already, by its maker
      at[i] = given;
      packed.ready[i] = true;
      continue;
    }
    for (std::size_t j = 0; j < i; ++j)
      if (packed.same[j] == j && stored(calls.begin()[j / 2], j % 2 == 1) == mine) packed.same[i] = j;
    if (packed.same[i] != i) continue;
    // Rounded by an earlier product of the open scope, or to be kept for the later ones.
    const std::shared_ptr<Storage>* owner = i % 2 == 1 ? call.b_owner : call.a_owner;
    if (owner != nullptr) {
      if ((at[i] = find_bf16_operand(mine)) != nullptr) {
        packed.ready[i] = true;
        continue;
      }
      if ((at[i] = keep_bf16_operand(mine, *owner)) != nullptr) continue;
    }
    packed.by_blocks[i] = true;  // rounded in this call: by the blocks, unless a use below needs it whole
  }
  // An operand rounded in this call whose every use is the A of a product
  // split by rows of op(A) (a Linear backward's output gradient g, in dx =
  // g W and dW = g^T x with out >= in) is rounded by each block, its part
  // (GemmCall::a_source). Any other is rounded whole into a buffer here.
  for (std::size_t i = 0; i < 2 * packed.count; ++i)
    if (!split_a(calls, i)) packed.by_blocks[packed.same[i]] = false;
  for (std::size_t i = 0; i < 2 * packed.count; ++i) {
    if (packed.same[i] != i || at[i] != nullptr || packed.by_blocks[i]) continue;
    const StoredOperand mine = stored(calls.begin()[i / 2], i % 2 == 1);
    const auto size = static_cast<std::size_t>(mine.rows * mine.cols);
    if (buffers[i].size() < size) buffers[i].resize(size);
    at[i] = buffers[i].data();
  }
  for (std::size_t i = 0; i < 2 * packed.count; ++i) at[i] = at[packed.same[i]];
  for (std::size_t j = 0; j < packed.count; ++j) {
    const GemmCall<float>& c = calls.begin()[j];
    const StoredOperand a = stored(c, false);
    const bool by_blocks = packed.by_blocks[packed.same[2 * j]];
    packed.calls[j] = {.ta = c.ta, .tb = c.tb, .m = c.m, .n = c.n, .k = c.k, .a = at[2 * j], .lda = a.cols,
                       .b = at[2 * j + 1], .ldb = stored(c, true).cols, .c = c.c, .ldc = c.ldc, .alpha = c.alpha,
                       .beta = c.beta, .a_source = by_blocks ? a.data : nullptr, .a_source_ld = a.ld,
                       .bias = c.bias};
  }
  return packed;
}

void pack_operand(std::initializer_list<GemmCall<float>> calls, std::size_t i, int64_t chunk,
                  const PackedOperands& packed) {
  const GemmCall<float>& c = calls.begin()[i / 2];
  // Another operand's buffer, packed by that one; a kept copy, packed by an
  // earlier product; or rounded block by block.
  if (packed.same[i] != i || packed.ready[i] || packed.by_blocks[i]) return;
  const bool b = i % 2 == 1;
  const StoredOperand from = stored(c, b);
  const auto [r0, r1] = block_range(from.rows, chunk, kPackChunks);
  if (r1 <= r0) return;
  const GemmCall<float, bf16_t>& to = packed.calls[i / 2];
  // The buffer is this operand's own (pack_operands): writing through it is safe.
  auto* dst = const_cast<bf16_t*>(b ? to.b : to.a);
  pack_bf16(from.data + r0 * from.ld, r1 - r0, from.cols, from.ld, dst + r0 * from.cols);
}

}  // namespace detail
}  // namespace headlab::core

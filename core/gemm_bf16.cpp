// float32 GEMMs in bf16 mixed precision: see core/gemm.h.
//
// A and B are rounded into this thread's bf16 buffers, each operand packed
// densely in the layout it had (a transposed operand stays transposed, with
// its leading dimension now its width; a batch's products follow one
// another), then the backend multiplies the bf16 operands with f32
// accumulation into the caller's f32 C, strides and alpha / beta unchanged.
// Dense operands are also what puts oneDNN's matmul on its brgemm kernels.
//
// The conversion is a pass over each operand per product: it reads 4 bytes
// and writes 2 per element, against the 2 k (m or n) FLOPs each element
// takes part in. Kernels that wrote their outputs in bf16 themselves
// (LayerNorm, GELU, softmax) would remove it; docs/performance.md measures it.
#include <algorithm>
#include <vector>

#include "core/bf16.h"
#include "core/gemm.h"

namespace headlab::core {

void pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, bf16_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * ld;
    bf16_t* out = dst + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = to_bf16(in[c]);
  }
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
  if (backend == GemmBackend::onednn) onednn_batched_gemm_bf16(h, g.alpha, g.beta, g.c);
  else openblas_batched_gemm_bf16(h, g.alpha, g.beta, g.c);
}

}  // namespace detail
}  // namespace headlab::core

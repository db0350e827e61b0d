// Attention's small products in headlab's loops (core/gemm_small.cpp): a
// double-precision reference on every transpose, the widths the loops
// specialize (32, 64) and others, alpha and beta (C unread at beta 0), a
// batch with strides; which products take the loops; the same bits on both
// backends; and the kernel listing naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/attention_kernels.h"
#include "core/gemm.h"
#include "core/gemm_kernels.h"
#include "core/tensor.h"
#include "tests/core/gemm_test_util.h"

namespace headlab::core {
namespace {

// A batch of 2 x 3 products op(A) [m, k] op(B) [k, n] with leading
// dimensions wider than the matrices and C's padding columns watched.
template <class T>
void check_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, T beta) {
  const int64_t outer = 2, inner = 3;
  const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  const int64_t a_size = (ta ? k : m) * lda, b_size = (tb ? n : k) * ldb, c_size = m * ldc;
  const std::vector<float> a32 = test::random_floats(outer * inner * a_size, 1),
                           b32 = test::random_floats(outer * inner * b_size, 2),
                           c32 = test::random_floats(outer * inner * c_size, 3);
  const std::vector<T> a(a32.begin(), a32.end()), b(b32.begin(), b32.end());
  std::vector<T> c(c32.begin(), c32.end());
  // At beta 0, C is written without being read: NaN there must not come through.
  if (beta == T(0))
    for (int64_t i = 0; i < outer * inner * c_size; ++i)
      if (i % ldc < n) c[static_cast<std::size_t>(i)] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c0 = c;
  detail::BatchedGemm<T> g{.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .outer = outer, .inner = inner,
                           .a = a.data(), .lda = lda, .a_stride = {inner * a_size, a_size},
                           .b = b.data(), .ldb = ldb, .b_stride = {inner * b_size, b_size},
                           .c = c.data(), .ldc = ldc, .c_stride = {inner * c_size, c_size}, .alpha = alpha,
                           .beta = beta};
  detail::small_batched_gemm(g);
  const double tolerance = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (int64_t pr = 0; pr < outer * inner; ++pr) {
    const T* ap = a.data() + pr * a_size;
    const T* bp = b.data() + pr * b_size;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const std::size_t at = static_cast<std::size_t>(pr * c_size + i * ldc + j);
        if (j >= n) {  // padding past n is never written
          EXPECT_EQ(c[at], c0[at]);
          continue;
        }
        const test::ReferenceEntry ref = test::reference_entry(ta, tb, k, ap, lda, bp, ldb, i, j);
        const double want = alpha * ref.value + (beta == T(0) ? 0.0 : beta * static_cast<double>(c0[at]));
        ASSERT_NEAR(c[at], want, tolerance * (1 + ref.size + std::abs(want)))
            << "ta " << ta << " tb " << tb << " m " << m << " n " << n << " k " << k << " product " << pr << " (" << i
            << ", " << j << ")";
      }
  }
}

TEST(SmallProducts, MatchADoubleReferenceOnEveryTransposeAndWidth) {
  struct Size {
    int64_t m, n, k;
  };
  // n 32 and 64 (the op(B) = B widths the loops fix at compile time), k 32
  // and 64 (the dot products' fixed depths), and widths they take as given.
  for (const Size s : {Size{3, 32, 3}, Size{6, 64, 6}, Size{3, 3, 32}, Size{8, 8, 64}, Size{5, 7, 9}, Size{1, 1, 1}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const double alpha : {1.0, 0.5})
          for (const double beta : {0.0, 1.0, 0.5}) {
            check_batch<float>(ta, tb, s.m, s.n, s.k, static_cast<float>(alpha), static_cast<float>(beta));
            check_batch<double>(ta, tb, s.m, s.n, s.k, alpha, beta);
          }
}

// Attention's six products at T = 3, d_k = 32 take the loops; at T = 64
// they stay on the library, and so does any product of the linear layers.
TEST(SmallProducts, ShortSequencesTakeTheLoopsLongerOnesTheLibrary) {
  const auto product = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    return detail::BatchedGemm<float>{.ta = ta, .tb = tb, .m = m, .n = n, .k = k};
  };
  for (const int64_t T : {3, 64}) {
    const int64_t dk = 32;
    const bool small = T == 3;
    EXPECT_EQ(detail::is_small_product(product(false, true, T, T, dk)), small) << "S = Q K^T at T " << T;
    EXPECT_EQ(detail::is_small_product(product(false, false, T, dk, T)), small) << "O = P V at T " << T;
    EXPECT_EQ(detail::is_small_product(product(false, true, T, T, dk)), small) << "dP = dO V^T at T " << T;
    EXPECT_EQ(detail::is_small_product(product(true, false, T, dk, T)), small) << "dV = P^T dO at T " << T;
    EXPECT_EQ(detail::is_small_product(product(false, false, T, dk, T)), small) << "dQ = dS K at T " << T;
    EXPECT_EQ(detail::is_small_product(product(true, false, T, dk, T)), small) << "dK = dS^T Q at T " << T;
  }
  EXPECT_FALSE(detail::is_small_product(product(false, true, 1, 300, 1))) << "wider than the loops' accumulator";
  EXPECT_FALSE(detail::is_small_product(product(false, false, 4, 4, 0))) << "k = 0: C = beta C, the library's way";
}

Tensor random_tensor(Shape shape, uint64_t seed) {
  int64_t count = 1;
  for (const int64_t s : shape) count *= s;
  const std::vector<float> v = test::random_floats(count, seed);
  return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), shape, DType::f32);
}

// The loops do not depend on the backend: attention at T = 3 gives the same
// bits on oneDNN and OpenBLAS, forward and backward; and the kernel listing
// names the loops for each of its products.
TEST(SmallProducts, AttentionAtThreeTokensIsTheSameOnBothBackendsAndListedAsLoops) {
  const F32Gemms f32;  // the suite's bf16 pass would round the operands first
  const GemmBackend before = gemm_backend();
  const Tensor q = random_tensor({5, 3, 64}, 11), k = random_tensor({5, 3, 64}, 12), v = random_tensor({5, 3, 64}, 13);
  const Tensor dout = random_tensor({5, 3, 64}, 14);
  const AttentionShape shape{.heads = 2, .causal = true, .scale = 0.125};
  std::vector<std::vector<double>> outputs[2];
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    set_gemm_backend(backend);
    const AttentionForward f = attention_forward(q, k, v, shape, Tensor(), Tensor());
    const AttentionGrads g = attention_backward(dout, q, k, v, f.probs, shape, Tensor(), Tensor(), false);
    outputs[backend == GemmBackend::onednn ? 0 : 1] = {f.out.to_vector(), f.probs.to_vector(), g.dq.to_vector(),
                                                       g.dk.to_vector(), g.dv.to_vector()};
  }
  set_gemm_backend(before);
  EXPECT_EQ(outputs[0], outputs[1]);
  const std::vector<GemmKernelUse> uses = gemm_kernels_of([&] {
    const AttentionForward f = attention_forward(q, k, v, shape, Tensor(), Tensor());
    attention_backward(dout, q, k, v, f.probs, shape, Tensor(), Tensor(), false);
  });
  int calls = 0;
  for (const GemmKernelUse& u : uses) {
    EXPECT_EQ(u.kernel, "loops") << u.shapes;
    calls += u.calls;
  }
  EXPECT_EQ(calls, 6);  // Q K^T, P V; dO V^T, P^T dO, dS K, dS^T Q
  // Q K^T of 5 x 2 heads, [3, 32] by [32, 3]: oneDNN's form of a batched matmul.
  bool found = false;
  for (const GemmKernelUse& u : uses) found = found || u.shapes == "5x2x3x32:5x2x32x3:5x2x3x3";
  EXPECT_TRUE(found);
}

// The loops' lines carry oneDNN's format letters: Q K^T's B is read
// transposed (abdc), P V's as it lies (abcd).
TEST(SmallProducts, ListingNamesTransposedOperandsInOneDnnsLetters) {
  const F32Gemms f32;
  const Tensor q = random_tensor({4, 3, 64}, 21), k = random_tensor({4, 3, 64}, 22), v = random_tensor({4, 3, 64}, 23);
  const AttentionShape shape{.heads = 2, .causal = true, .scale = 0.125};
  const std::vector<GemmKernelUse> uses =
      gemm_kernels_of([&] { attention_forward(q, k, v, shape, Tensor(), Tensor()); });
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].shapes, "4x2x3x32:4x2x32x3:4x2x3x3");
  EXPECT_EQ(uses[0].layouts, "src_f32:abcd wei_f32:abdc dst_f32:abcd");
  EXPECT_EQ(uses[1].shapes, "4x2x3x3:4x2x3x32:4x2x3x32");
  EXPECT_EQ(uses[1].layouts, "src_f32:abcd wei_f32:abcd dst_f32:abcd");
}

}  // namespace
}  // namespace headlab::core

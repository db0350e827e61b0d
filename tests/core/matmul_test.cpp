// GEMM against a naive f64 reference: transposes, batches, broadcasting.
#include <gtest/gtest.h>

#include <cstring>

#include "core/ops.h"
#include "core/random.h"
#include "core/threads.h"
#include "tests/precision.h"

namespace headlab::core {
namespace {

// out[..., i, j] = sum_k a[..., i, k] b[..., k, j] for 3-D operands of equal batch.
Tensor naive_bmm(const Tensor& a, const Tensor& b) {
  const int64_t bs = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  Tensor out = Tensor::zeros({bs, m, n}, DType::f64);
  for (int64_t z = 0; z < bs; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a.at({z, i, p}) * b.at({z, p, j});
        out.set({z, i, j}, s);
      }
  return out;
}

class MatmulTranspose : public ::testing::TestWithParam<std::tuple<bool, bool, DType>> {};

TEST_P(MatmulTranspose, MatchesNaiveReference) {
  const auto [ta, tb, dtype] = GetParam();
  Generator gen(7);
  const int64_t m = 5, k = 7, n = 3;
  // Build operands so that the logical [m, k] / [k, n] matrices are transposed views when asked.
  const Tensor a_store = gen.normal(ta ? Shape{k, m} : Shape{m, k}, 0, 1, dtype);
  const Tensor b_store = gen.normal(tb ? Shape{n, k} : Shape{k, n}, 0, 1, dtype);
  const Tensor a = ta ? a_store.transpose(0, 1) : a_store;
  const Tensor b = tb ? b_store.transpose(0, 1) : b_store;
  const Tensor got = matmul(a, b);
  const Tensor want = naive_bmm(a.to(DType::f64).unsqueeze(0), b.to(DType::f64).unsqueeze(0)).squeeze(0);
  // In bf16 (the suite's bf16 pass) the float32 operands are rounded: each
  // element may move by the rounding's bound on its sum of |a_ip b_pj|.
  const Tensor abs_products =
      naive_bmm(abs(a.to(DType::f64)).unsqueeze(0), abs(b.to(DType::f64)).unsqueeze(0)).squeeze(0);
  const double largest = max_abs_diff(abs_products, Tensor::zeros_like(abs_products));
  const double rounding = dtype == DType::f32 ? headlab::test::bf16_rounding_bound(largest) : 0;
  EXPECT_LT(max_abs_diff(got.to(DType::f64), want), (dtype == DType::f64 ? 1e-12 : 1e-5) + rounding);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, MatmulTranspose,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(DType::f32, DType::f64)));

TEST(Matmul, BatchedMatchesNaive) {
  Generator gen(8);
  const Tensor a = gen.normal({4, 3, 6}, 0, 1, DType::f64), b = gen.normal({4, 6, 2}, 0, 1, DType::f64);
  EXPECT_LT(max_abs_diff(matmul(a, b), naive_bmm(a, b)), 1e-12);
  // Transposed batched views.
  const Tensor bt = gen.normal({4, 2, 6}, 0, 1, DType::f64).transpose(1, 2);
  EXPECT_LT(max_abs_diff(matmul(a, bt), naive_bmm(a, bt.contiguous())), 1e-12);
}

TEST(Matmul, BroadcastBatchAxes) {
  Generator gen(9);
  const Tensor a = gen.normal({2, 1, 3, 4}, 0, 1, DType::f64);
  const Tensor b = gen.normal({5, 4, 2}, 0, 1, DType::f64);
  const Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      const Tensor want = naive_bmm(a.select(0, i).select(0, 0).unsqueeze(0), b.select(0, j).unsqueeze(0));
      EXPECT_LT(max_abs_diff(c.select(0, i).select(0, j), want.squeeze(0)), 1e-12);
    }
}

TEST(Matmul, SharedRightOperandFoldsIntoOneGemm) {
  // The Linear layer's case: x [B, T, in] @ W^T [in, out].
  Generator gen(10);
  const Tensor x = gen.normal({3, 4, 5}, 0, 1, DType::f64);
  const Tensor w = gen.normal({6, 5}, 0, 1, DType::f64);
  const Tensor y = matmul(x, w.transpose(0, 1));
  ASSERT_EQ(y.shape(), (Shape{3, 4, 6}));
  const Tensor want = naive_bmm(x.reshape({1, 12, 5}), w.transpose(0, 1).contiguous().unsqueeze(0));
  EXPECT_LT(max_abs_diff(y.reshape({12, 6}), want.squeeze(0)), 1e-12);
}

TEST(Matmul, ManySmallProductsInParallel) {
  Generator gen(11);
  const Tensor q = gen.normal({16, 8, 6, 4}, 0, 1, DType::f64);
  const Tensor k = gen.normal({16, 8, 6, 4}, 0, 1, DType::f64);
  const Tensor s = matmul(q, k.transpose(-1, -2));
  const Tensor want = naive_bmm(q.reshape({128, 6, 4}), k.reshape({128, 6, 4}).transpose(1, 2).contiguous());
  EXPECT_LT(max_abs_diff(s.reshape({128, 6, 6}), want), 1e-12);
}

TEST(Matmul, NonBlasLayoutIsCopied) {
  Generator gen(12);
  const Tensor a = gen.normal({6, 8}, 0, 1, DType::f64).slice(1, 0, 8, 2);  // column stride 2
  const Tensor b = gen.normal({4, 3}, 0, 1, DType::f64);
  EXPECT_LT(max_abs_diff(matmul(a, b), matmul(a.contiguous(), b)), 1e-12);
}

TEST(Matmul, VectorsPromoteAsInNumpy) {
  const Tensor m = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::f64);
  const Tensor v = Tensor::from_vector({1, 1}, {2}, DType::f64);
  EXPECT_EQ(matmul(m, v).to_vector(), (std::vector<double>{3, 7}));
  EXPECT_EQ(matmul(v, m).to_vector(), (std::vector<double>{4, 6}));
  EXPECT_EQ(matmul(v, v).dim(), 0);
  EXPECT_EQ(matmul(v, v).item(), 2);
}

TEST(Matmul, ZeroInnerSizeGivesZeros) {
  const Tensor c = matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector(), std::vector<double>(6, 0.0));
}

TEST(Matmul, ShapeErrorsNameBothShapes) {
  try {
    (void)matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})), std::invalid_argument);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2}), Tensor::zeros({2, 2}, DType::f64)), std::invalid_argument);
  EXPECT_THROW(matmul(Tensor::scalar(1), Tensor::zeros({1})), std::invalid_argument);
}


// linear_backward's bias gradient, summed in its products' parallel region,
// has core::sum(g, {0})'s bits: several column blocks (out > 256), 1 and 2
// threads, with and without the other products, float and double, and a
// transposed g (summed apart).
TEST(Matmul, LinearBackwardsBiasGradientHasSumsBits) {
  Generator gen(21);
  const int threads = num_threads();
  for (const DType dtype : {DType::f32, DType::f64}) {
    const Tensor g = gen.normal({300, 600}, 0.0, 1.0, dtype), x = gen.normal({300, 40}, 0.0, 1.0, dtype);
    const Tensor w = gen.normal({600, 40}, 0.0, 1.0, dtype);
    const Tensor g_t = gen.normal({600, 300}, 0.0, 1.0, dtype).transpose(0, 1);
    for (const Tensor& grad : {g, g_t}) {
      const Tensor want = sum(grad, {0});
      const std::size_t bytes = static_cast<std::size_t>(want.numel()) * (dtype == DType::f64 ? 8 : 4);
      for (const int t : {1, 2})
        for (const bool dx : {true, false}) {
          set_num_threads(t);
          const LinearGrads d = linear_backward(grad, x, w, dx, true, true);
          set_num_threads(threads);
          ASSERT_EQ(d.dbias.shape(), want.shape());
          EXPECT_EQ(std::memcmp(d.dbias.raw_data(), want.raw_data(), bytes), 0) << t << " thread(s), dx " << dx;
          EXPECT_EQ(linear_backward(grad, x, w, dx, true).dbias.defined(), false);
        }
    }
  }
}

}  // namespace
}  // namespace headlab::core

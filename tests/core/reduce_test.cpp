// Reductions against naive loops, over any set of axes, with keepdim.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "core/random.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

// Naive reference: sum of x[i, j, k] over the axes flagged in `red`.
Tensor naive_sum(const Tensor& x, bool r0, bool r1, bool r2) {
  const int64_t n0 = x.size(0), n1 = x.size(1), n2 = x.size(2);
  Tensor out = Tensor::zeros({r0 ? 1 : n0, r1 ? 1 : n1, r2 ? 1 : n2}, DType::f64);
  for (int64_t i = 0; i < n0; ++i)
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t k = 0; k < n2; ++k) {
        const std::vector<int64_t> o = {r0 ? 0 : i, r1 ? 0 : j, r2 ? 0 : k};
        out.set(o, out.at(o) + x.at({i, j, k}));
      }
  return out;
}

TEST(Reduce, SumOverEverySubsetOfAxesMatchesNaive) {
  Generator gen(4);
  const Tensor x = gen.normal({3, 4, 5}, 0, 1, DType::f64);
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < 3; ++a)
      if (mask & (1 << a)) axes.push_back(a);
    const Tensor expected = naive_sum(x, mask & 1, mask & 2, mask & 4);
    const Tensor got = sum(x, axes, true);
    ASSERT_EQ(got.shape(), expected.shape()) << mask;
    EXPECT_LT(max_abs_diff(got, expected), 1e-12) << mask;
    // keepdim=false drops the reduced axes.
    EXPECT_EQ(sum(x, axes, false).numel(), expected.numel());
  }
}

TEST(Reduce, SumOfStridedViewMatchesContiguous) {
  Generator gen(5);
  const Tensor x = gen.normal({6, 7, 8}, 0, 1, DType::f64).permute({2, 0, 1}).slice(1, 0, 6, 2);
  ASSERT_FALSE(x.is_contiguous());
  const Tensor c = x.contiguous();
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {}})
    EXPECT_LT(max_abs_diff(sum(x, axes), sum(c, axes)), 1e-12);
}

TEST(Reduce, ExactSmallValues) {
  const Tensor x = Tensor::from_vector({1, 5, 3, 4, 2, 6}, {2, 3}, DType::f64);
  EXPECT_EQ(sum(x).item(), 21);
  EXPECT_EQ(sum(x, {1}).to_vector(), (std::vector<double>{9, 12}));
  EXPECT_EQ(sum(x, {-2}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(mean(x, {0}).to_vector(), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(max(x, {1}).to_vector(), (std::vector<double>{5, 6}));
  EXPECT_EQ(max(x).item(), 6);
  EXPECT_EQ(argmax(x, 1).to_vector(), (std::vector<double>{1, 2}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(argmax(Tensor::from_vector({2, 2, 1}, {3}), 0).item(), 0);  // first on ties
}

TEST(Reduce, F32SumsAccumulateInDouble) {
  const Tensor x = Tensor::full({1 << 20}, 0.1, DType::f32);
  EXPECT_NEAR(sum(x).item(), 0.1f * (1 << 20), 1e-1);
}

TEST(Reduce, ErrorsNameTheOp) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(sum(x, {2}), std::invalid_argument);
  EXPECT_THROW(sum(x, {0, 0}), std::invalid_argument);
  EXPECT_THROW(max(Tensor::zeros({0})), std::invalid_argument);
  EXPECT_THROW(mean(Tensor::zeros({0})), std::invalid_argument);
  EXPECT_THROW(argmax(Tensor::zeros({3, 0}), 1), std::invalid_argument);
  EXPECT_EQ(sum(Tensor::zeros({0})).item(), 0);  // the empty sum is defined
}

TEST(Reduce, SumToReversesBroadcasting) {
  const Tensor g = Tensor::ones({2, 3, 4}, DType::f64);
  EXPECT_EQ(sum_to(g, {3, 1}).to_vector(), (std::vector<double>{8, 8, 8}));
  EXPECT_EQ(sum_to(g, {4}).to_vector(), (std::vector<double>{6, 6, 6, 6}));
  EXPECT_EQ(sum_to(g, {}).item(), 24);
  EXPECT_THROW(sum_to(g, {5}), std::invalid_argument);
}

TEST(Reduce, ResultsDoNotDependOnThreadCount) {
  Generator gen(6);
  const Tensor x = gen.normal({512, 300}, 0, 1);
  set_num_threads(1);
  const auto one = sum(x, {0}).to_vector();
  const auto one_rows = sum(x, {1}).to_vector();
  set_num_threads(2);
  const auto two = sum(x, {0}).to_vector();
  const auto two_rows = sum(x, {1}).to_vector();
  set_num_threads(0);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one_rows, two_rows);
}

}  // namespace
}  // namespace headlab::core

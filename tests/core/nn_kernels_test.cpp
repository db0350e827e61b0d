// Fused kernels: forward against a composition of core ops, backward against
// central differences in float64, bit-identical results for any thread count.
#include "core/nn_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/bf16.h"
#include "core/ops.h"
#include "core/random.h"
#include "core/threads.h"
#include "core/vec_math.h"

namespace headlab::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor normal(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  return Generator(seed).normal(shape, 0.0, 1.0, dtype);
}

// d/dx of loss(x) by central differences, element by element (float64).
Tensor numeric_grad(const std::function<double(const Tensor&)>& loss, const Tensor& x0) {
  Tensor x = x0.clone();
  Tensor g = Tensor::empty(x.shape(), DType::f64);
  double* p = x.data<double>();
  const double eps = 1e-6;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double plus = loss(x);
    p[i] = saved - eps;
    const double minus = loss(x);
    p[i] = saved;
    g.data<double>()[i] = (plus - minus) / (2 * eps);
  }
  return g;
}

// sum(w * y): a scalar whose gradient with respect to y is w.
double weighted_sum(const Tensor& y, const Tensor& w) { return sum(mul(y, w)).item(); }

// Runs f with 1 thread and with 2, and checks the outputs are bit-identical.
void expect_thread_independent(const std::function<std::vector<Tensor>()>& f) {
  const int saved = num_threads();
  set_num_threads(1);
  const std::vector<Tensor> one = f();
  set_num_threads(2);
  const std::vector<Tensor> two = f();
  set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i].to_vector(), two[i].to_vector()) << "output " << i;
}

// --- softmax ---

TEST(SoftmaxKernel, MatchesExpOverSumOfCoreOps) {
  const Tensor x = normal({3, 4, 7}, 1);
  const Tensor e = exp(sub(x, max(x, {-1}, true)));
  const Tensor expected = div(e, sum(e, {-1}, true));
  EXPECT_LT(max_abs_diff(softmax_forward(x), expected), 1e-15);
}

TEST(SoftmaxKernel, MinusInfinityGivesExactZerosAndAnAllMaskedRowGivesZeros) {
  const Tensor x = Tensor::from_vector({0, -kInf, 1, -kInf, -kInf, -kInf}, {2, 3}, DType::f32);
  const std::vector<double> y = softmax_forward(x).to_vector();
  EXPECT_EQ(y[1], 0.0);
  EXPECT_NEAR(y[0] + y[2], 1.0, 1e-6);
  EXPECT_EQ(y[3], 0.0);
  EXPECT_EQ(y[4], 0.0);
  EXPECT_EQ(y[5], 0.0);
}

TEST(SoftmaxKernel, HugeInputsDoNotOverflow) {
  const Tensor x = Tensor::from_vector({1e4, 1e4 - 1, -1e4}, {3}, DType::f32);
  const std::vector<double> y = softmax_forward(x).to_vector();
  EXPECT_NEAR(y[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(y[2], 0.0);
}

// Float rows of at most 8 (attention's at T <= 8) take their own path
// (core/softmax_row.h): its exps and then their sum in order, which is what
// the general loop gave such rows; the same bits as before rest on that.
TEST(SoftmaxKernel, ShortFloatRowsSumTheirExpsInOrder) {
  for (int64_t C = 1; C <= 8; ++C) {
    const Tensor x = Generator(static_cast<uint64_t>(C)).normal({64, C}, 0.0, 4.0, DType::f32);
    const std::vector<double> y = softmax_forward(x).to_vector();
    const float* xs = x.data<float>();
    for (int64_t r = 0; r < 64; ++r) {
      const float* row = xs + r * C;
      float m = row[0];
      for (int64_t c = 1; c < C; ++c) m = std::max(m, row[c]);
      float e[8], sum = 0.0f;
      for (int64_t c = 0; c < C; ++c) sum += (e[c] = detail::fast_exp(row[c] - m));
      double total = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double got = y[static_cast<std::size_t>(r * C + c)];
        ASSERT_EQ(got, static_cast<double>(e[c] * (1.0f / sum))) << "C " << C << " row " << r << " col " << c;
        total += got;
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  }
}

TEST(SoftmaxKernel, BackwardMatchesCentralDifferences) {
  const Tensor x = normal({3, 5}, 2), w = normal({3, 5}, 3);
  const Tensor dx = softmax_backward(softmax_forward(x), w);
  const Tensor num = numeric_grad([&](const Tensor& t) { return weighted_sum(softmax_forward(t), w); }, x);
  EXPECT_LT(max_abs_diff(dx, num), 1e-8);
}

TEST(SoftmaxKernel, ANonContiguousInputGivesTheSameResult) {
  const Tensor x = normal({5, 4}, 4).transpose(0, 1);
  EXPECT_EQ(softmax_forward(x).to_vector(), softmax_forward(x.contiguous()).to_vector());
}

// --- log-softmax ---

TEST(LogSoftmaxKernel, MatchesXMinusLogSumExp) {
  const Tensor x = normal({4, 6}, 5);
  const Tensor m = max(x, {-1}, true);
  const Tensor expected = sub(sub(x, m), log(sum(exp(sub(x, m)), {-1}, true)));
  EXPECT_LT(max_abs_diff(log_softmax_forward(x), expected), 1e-14);
}

TEST(LogSoftmaxKernel, BackwardMatchesCentralDifferences) {
  const Tensor x = normal({3, 5}, 6), w = normal({3, 5}, 7);
  const Tensor dx = log_softmax_backward(log_softmax_forward(x), w);
  const Tensor num = numeric_grad([&](const Tensor& t) { return weighted_sum(log_softmax_forward(t), w); }, x);
  EXPECT_LT(max_abs_diff(dx, num), 1e-8);
}

TEST(LogSoftmaxKernel, HugeLogitsStayExact) {
  const Tensor x = Tensor::from_vector({1e4, 0, -1e4}, {3}, DType::f32);
  EXPECT_EQ(log_softmax_forward(x).to_vector(), (std::vector<double>{0, -1e4, -2e4}));
}

// --- cross-entropy ---

TEST(CrossEntropyKernel, MatchesMinusMeanLogSoftmaxAtTheTargets) {
  const Tensor x = normal({5, 4}, 8);
  const std::vector<int32_t> t = {3, -1, 0, 2, 2};
  const CrossEntropyResult r = cross_entropy_forward(x, t);
  const Tensor ls = log_softmax_forward(x);
  const double expected = -(ls.at({0, 3}) + ls.at({2, 0}) + ls.at({3, 2}) + ls.at({4, 2})) / 4.0;
  EXPECT_EQ(r.count, 4);
  EXPECT_NEAR(r.loss, expected, 1e-14);
  EXPECT_LT(max_abs_diff(r.probs, softmax_forward(x)), 1e-15);
}

TEST(CrossEntropyKernel, HugeLogitsGiveExactValues) {
  const Tensor x = Tensor::from_vector({1e4, 0, -1e4, 0, 1e4, 0, 5, 5, 5}, {3, 3}, DType::f32);
  const CrossEntropyResult r = cross_entropy_forward(x, std::vector<int32_t>{0, 0, -1});
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.loss, 5000.0);  // (0 + 1e4) / 2
}

TEST(CrossEntropyKernel, BackwardMatchesCentralDifferencesAndZeroesIgnoredRows) {
  const Tensor x = normal({4, 3}, 9);
  const std::vector<int32_t> t = {2, -1, 0, 1};
  const CrossEntropyResult r = cross_entropy_forward(x, t);
  const Tensor dx = cross_entropy_backward(r.probs, t, r.count, 2.0);
  const Tensor num = numeric_grad([&](const Tensor& v) { return 2.0 * cross_entropy_forward(v, t).loss; }, x);
  EXPECT_LT(max_abs_diff(dx, num), 1e-8);
  for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(dx.at({1, c}), 0.0);
}

TEST(CrossEntropyKernel, NoTargetsGiveZeroLossAndZeroGradient) {
  const Tensor x = normal({2, 3}, 10);
  const std::vector<int32_t> t = {-1, -1};
  const CrossEntropyResult r = cross_entropy_forward(x, t);
  EXPECT_EQ(r.loss, 0.0);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(cross_entropy_backward(r.probs, t, r.count, 1.0).to_vector(), std::vector<double>(6, 0.0));
}

TEST(CrossEntropyKernel, RejectsBadTargets) {
  const Tensor x = normal({2, 3}, 11);
  EXPECT_THROW(cross_entropy_forward(x, std::vector<int32_t>{0, 3}), std::invalid_argument);
  EXPECT_THROW(cross_entropy_forward(x, std::vector<int32_t>{0, -2}), std::invalid_argument);
  EXPECT_THROW(cross_entropy_forward(x, std::vector<int32_t>{0}), std::invalid_argument);
}

// --- layer norm ---

TEST(LayerNormKernel, MatchesMeanAndBiasedVarianceOfCoreOps) {
  const Tensor x = normal({2, 3, 8}, 12), w = normal({8}, 13), b = normal({8}, 14);
  const Tensor mu = mean(x, {-1}, true);
  const Tensor var = mean(mul(sub(x, mu), sub(x, mu)), {-1}, true);
  const Tensor rstd = pow(add(var, 1e-5), -0.5);
  const Tensor expected = add(mul(mul(sub(x, mu), rstd), w), b);
  const LayerNormResult r = layer_norm_forward(x, w, b, 1e-5);
  EXPECT_LT(max_abs_diff(r.y, expected), 1e-14);
  EXPECT_EQ(r.mean.shape(), (Shape{2, 3}));
  EXPECT_LT(max_abs_diff(r.mean, mu.reshape({2, 3})), 1e-15);
  EXPECT_LT(max_abs_diff(r.rstd, rstd.reshape({2, 3})), 1e-12);
}

TEST(LayerNormKernel, BackwardMatchesCentralDifferencesForXWeightAndBias) {
  const Tensor x = normal({3, 5}, 15), w = normal({5}, 16), b = normal({5}, 17), dy = normal({3, 5}, 18);
  const LayerNormResult r = layer_norm_forward(x, w, b, 1e-5);
  const LayerNormGrads g = layer_norm_backward(dy, x, w, r.mean, r.rstd);
  auto loss_x = [&](const Tensor& t) { return weighted_sum(layer_norm_forward(t, w, b, 1e-5).y, dy); };
  auto loss_w = [&](const Tensor& t) { return weighted_sum(layer_norm_forward(x, t, b, 1e-5).y, dy); };
  auto loss_b = [&](const Tensor& t) { return weighted_sum(layer_norm_forward(x, w, t, 1e-5).y, dy); };
  EXPECT_LT(max_abs_diff(g.dx, numeric_grad(loss_x, x)), 1e-8);
  EXPECT_LT(max_abs_diff(g.dweight, numeric_grad(loss_w, w)), 1e-8);
  EXPECT_LT(max_abs_diff(g.dbias, numeric_grad(loss_b, b)), 1e-8);
}

TEST(LayerNormKernel, UndefinedWeightAndBiasMeanOneAndZero) {
  const Tensor x = normal({4, 6}, 19);
  const LayerNormResult plain = layer_norm_forward(x, Tensor(), Tensor(), 1e-5);
  const LayerNormResult unit =
      layer_norm_forward(x, Tensor::ones({6}, DType::f64), Tensor::zeros({6}, DType::f64), 1e-5);
  EXPECT_EQ(plain.y.to_vector(), unit.y.to_vector());
  const LayerNormGrads g = layer_norm_backward(x, x, Tensor(), plain.mean, plain.rstd);
  EXPECT_FALSE(g.dweight.defined());
  EXPECT_TRUE(g.dbias.defined());
}

TEST(LayerNormKernel, BackwardIntoAddsDxToTheGradientGivenBitForBit) {
  // 70 rows: more than one block of rows (32), the last one partial.
  for (const DType dtype : {DType::f64, DType::f32}) {
    const Tensor x = normal({70, 24}, 31, dtype), w = normal({24}, 32, dtype), dy = normal({70, 24}, 33, dtype);
    const Tensor earlier = normal({70, 24}, 34, dtype);
    const LayerNormResult r = layer_norm_forward(x, w, w, 1e-5);
    const LayerNormGrads apart = layer_norm_backward(dy, x, w, r.mean, r.rstd);
    Tensor into = earlier.clone();
    const LayerNormGrads fused = layer_norm_backward_into(dy, x, w, r.mean, r.rstd, into);
    EXPECT_EQ(into.to_vector(), add(earlier, apart.dx).to_vector()) << to_string(dtype);
    EXPECT_TRUE(fused.dx.shares_storage(into)) << "the result's dx is dx_into itself";
    EXPECT_EQ(fused.dweight.to_vector(), apart.dweight.to_vector()) << to_string(dtype);
    EXPECT_EQ(fused.dbias.to_vector(), apart.dbias.to_vector()) << to_string(dtype);
  }
  const Tensor x = normal({3, 4}, 35), dy = normal({3, 4}, 36);
  const LayerNormResult r = layer_norm_forward(x, Tensor(), Tensor(), 1e-5);
  EXPECT_THROW(layer_norm_backward_into(dy, x, Tensor(), r.mean, r.rstd, Tensor()), std::invalid_argument);
  EXPECT_THROW(layer_norm_backward_into(dy, x, Tensor(), r.mean, r.rstd, normal({4, 3}, 37).transpose(0, 1)),
               std::invalid_argument);
  EXPECT_THROW(layer_norm_backward_into(dy, x, Tensor(), r.mean, r.rstd, normal({3, 4}, 38, DType::f32)),
               std::invalid_argument);
}

TEST(LayerNormKernel, RejectsAWeightOfTheWrongSize) {
  const Tensor x = normal({2, 4}, 20);
  EXPECT_THROW(layer_norm_forward(x, Tensor::ones({3}, DType::f64), Tensor(), 1e-5), std::invalid_argument);
  EXPECT_THROW(layer_norm_forward(x, Tensor::ones({4}, DType::f32), Tensor(), 1e-5), std::invalid_argument);
}

// --- GELU ---

TEST(GeluKernel, MatchesHalfXTimesOnePlusErf) {
  const Tensor x = normal({50}, 21);
  const Tensor expected = mul(mul(x, 0.5), add(erf(mul(x, 1.0 / std::sqrt(2.0))), 1.0));
  EXPECT_LT(max_abs_diff(gelu_forward(x), expected), 1e-15);
}

TEST(GeluKernel, BackwardMatchesCentralDifferences) {
  const Tensor x = normal({4, 5}, 22), w = normal({4, 5}, 23);
  const Tensor num = numeric_grad([&](const Tensor& t) { return weighted_sum(gelu_forward(t), w); }, x);
  EXPECT_LT(max_abs_diff(gelu_backward(x, w), num), 1e-8);
}

TEST(BiasGeluKernel, IsGeluOfTheSumAndItsSlope) {
  for (const DType dtype : {DType::f64, DType::f32}) {
    const Tensor h = normal({6, 5}, 31, dtype), b = normal({5}, 32, dtype);
    const Tensor x = add(h, b);
    const GeluWithSlope r = bias_gelu_forward(h.clone(), b, true);
    EXPECT_EQ(r.y.to_vector(), gelu_forward(x).to_vector()) << to_string(dtype);
    const double tol = dtype == DType::f64 ? 1e-15 : 1e-6;
    EXPECT_LT(max_abs_diff(r.slope_values(), gelu_backward(x, Tensor::ones(x.shape(), dtype))), tol)
        << to_string(dtype);
    // Without a bias it is GELU of h; without a slope only y is made.
    EXPECT_EQ(bias_gelu_forward(h.clone(), Tensor(), false).y.to_vector(), gelu_forward(h).to_vector());
    EXPECT_FALSE(bias_gelu_forward(h.clone(), b, false).slope.defined());
  }
}

TEST(BiasGeluKernel, WritesOverItsInputAndRejectsAViewOrABadBias) {
  const Tensor h = normal({3, 4}, 33, DType::f32);
  const GeluWithSlope r = bias_gelu_forward(h, Tensor(), false);
  EXPECT_EQ(r.y.data<float>(), h.data<float>());
  EXPECT_THROW(bias_gelu_forward(normal({4, 3}, 34).transpose(0, 1), Tensor(), false), std::invalid_argument);
  EXPECT_THROW(bias_gelu_forward(normal({3, 4}, 35), normal({3}, 36), false), std::invalid_argument);
}

TEST(BiasGeluKernel, SlopeMatchesCentralDifferences) {
  const Tensor h = normal({4, 5}, 37), b = normal({5}, 38);
  const Tensor num = numeric_grad([&](const Tensor& t) { return sum(bias_gelu_forward(t.clone(), b, false).y).item(); }, h);
  EXPECT_LT(max_abs_diff(bias_gelu_forward(h.clone(), b, true).slope, num), 1e-8);
}

TEST(GeluSlopeKernel, IsDyTimesTheSlopeOverDyWhenAskedWithTheColumnSums) {
  for (const DType dtype : {DType::f64, DType::f32}) {
    const Tensor slope = normal({7, 300}, 41, dtype), dy = normal({7, 300}, 42, dtype);
    const std::vector<double> expected = mul(dy, slope).to_vector();
    const GeluSlopeGrads fresh = gelu_backward_with_slope(dy, slope, true);
    EXPECT_FALSE(fresh.dh.shares_storage(dy));
    EXPECT_EQ(fresh.dh.to_vector(), expected) << to_string(dtype);
    EXPECT_LT(max_abs_diff(fresh.column_sums, sum(mul(dy, slope), {0})), dtype == DType::f64 ? 1e-12 : 1e-5);
    Tensor over = dy.clone();
    const GeluSlopeGrads in_place = gelu_backward_with_slope(over, slope, true, true);
    EXPECT_EQ(in_place.dh.raw_data(), over.raw_data());
    EXPECT_EQ(over.to_vector(), expected) << to_string(dtype);
    EXPECT_EQ(in_place.column_sums.to_vector(), fresh.column_sums.to_vector()) << to_string(dtype);
  }
  EXPECT_THROW(gelu_backward_with_slope(normal({4, 3}, 43).transpose(0, 1), normal({3, 4}, 44), false, true),
               std::invalid_argument);
}

// In bf16 precision the backward makes dh only rounded: the rounding of the
// float dh above, bit for bit, and the same column sums.
TEST(GeluSlopeKernel, RoundedIsTheRoundingOfDhWithTheSameColumnSums) {
  const Tensor slope = normal({7, 300}, 45, DType::f32), dy = normal({7, 300}, 46, DType::f32);
  const GeluSlopeGrads dh = gelu_backward_with_slope(dy, slope, true);
  for (const bool sums : {true, false}) {
    const GeluSlopeRounded rounded = gelu_backward_rounded(dy, slope, sums);
    ASSERT_TRUE(rounded.dh);
    ASSERT_EQ(rounded.dh.rows, 7);
    ASSERT_EQ(rounded.dh.cols, 300);
    std::vector<bf16_t> want(7 * 300);
    pack_bf16(dh.dh.data<float>(), 7, 300, 300, want.data());
    EXPECT_EQ(*rounded.dh.values, want);
    EXPECT_EQ(rounded.column_sums.defined(), sums);
    if (sums) {
      EXPECT_EQ(rounded.column_sums.to_vector(), dh.column_sums.to_vector());
    }
  }
  // A held handle keeps its values: the next call takes another buffer.
  const GeluSlopeRounded first = gelu_backward_rounded(dy, slope, false);
  const std::vector<bf16_t> before = *first.dh.values;
  const GeluSlopeRounded second = gelu_backward_rounded(mul(dy, 2.0), slope, false);
  EXPECT_NE(first.dh.data(), second.dh.data());
  EXPECT_EQ(*first.dh.values, before);
  EXPECT_THROW(gelu_backward_rounded(normal({7, 3}, 47), normal({7, 3}, 48), false), std::invalid_argument);
}

// --- the residual add with the next LayerNorm ---

TEST(AddLayerNormKernel, IsTheAddThenTheLayerNormBitForBit) {
  for (const DType dtype : {DType::f64, DType::f32}) {
    const Tensor a = normal({5, 8}, 41, dtype), b = normal({8, 5}, 42, dtype).transpose(0, 1);
    const Tensor w = normal({8}, 43, dtype), bias = normal({8}, 44, dtype);
    const AddLayerNormResult r = add_layer_norm_forward(a, b, w, bias, 1e-5);
    const Tensor sum_ab = add(a, b);
    const LayerNormResult ln = layer_norm_forward(sum_ab, w, bias, 1e-5);
    EXPECT_EQ(r.sum.to_vector(), sum_ab.to_vector()) << to_string(dtype);
    EXPECT_EQ(r.norm.y.to_vector(), ln.y.to_vector()) << to_string(dtype);
    EXPECT_EQ(r.norm.mean.to_vector(), ln.mean.to_vector()) << to_string(dtype);
    EXPECT_EQ(r.norm.rstd.to_vector(), ln.rstd.to_vector()) << to_string(dtype);
  }
  EXPECT_THROW(add_layer_norm_forward(normal({2, 3}, 45), normal({3, 2}, 46), Tensor(), Tensor(), 1e-5),
               std::invalid_argument);
}

// --- embedding ---

TEST(EmbeddingKernel, GathersRowsAndScatterAddsInIdOrder) {
  const Tensor w = Tensor::from_vector({0, 1, 10, 11, 20, 21}, {3, 2}, DType::f32);
  const std::vector<int32_t> ids = {2, 0, 2};
  EXPECT_EQ(embedding_forward(w, ids).to_vector(), (std::vector<double>{20, 21, 0, 1, 20, 21}));
  const Tensor dout = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f32);
  EXPECT_EQ(embedding_backward(dout, ids, 3).to_vector(), (std::vector<double>{3, 4, 0, 0, 6, 8}));
  EXPECT_THROW(embedding_forward(w, std::vector<int32_t>{3}), std::invalid_argument);
}

// --- float32 and threads ---

TEST(NnKernels, Float32AgreesWithFloat64) {
  const Tensor x64 = normal({6, 16}, 24);
  const Tensor x32 = x64.to(DType::f32);
  EXPECT_LT(max_abs_diff(softmax_forward(x32).to(DType::f64), softmax_forward(x64)), 1e-6);
  EXPECT_LT(max_abs_diff(log_softmax_forward(x32).to(DType::f64), log_softmax_forward(x64)), 1e-5);
  EXPECT_LT(max_abs_diff(gelu_forward(x32).to(DType::f64), gelu_forward(x64)), 1e-6);
  EXPECT_LT(max_abs_diff(layer_norm_forward(x32, Tensor(), Tensor(), 1e-5).y.to(DType::f64),
                         layer_norm_forward(x64, Tensor(), Tensor(), 1e-5).y),
            1e-5);
}

TEST(NnKernels, ResultsAreBitIdenticalForOneOrTwoThreads) {
  // Large enough to cross kParallelGrain, so the 2-thread run really forks.
  const int64_t rows = 2 * kParallelGrain / 64 + 37, cols = 64;
  const Tensor x = normal({rows, cols}, 25, DType::f32);
  const Tensor dy = normal({rows, cols}, 26, DType::f32);
  const Tensor w = normal({cols}, 27, DType::f32);
  std::vector<int32_t> targets(static_cast<std::size_t>(rows));
  std::vector<int32_t> ids(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < targets.size(); ++i) {
    targets[i] = static_cast<int32_t>(i % 65) - 1;
    ids[i] = static_cast<int32_t>(i % 5);
  }
  expect_thread_independent([&] {
    const Tensor p = softmax_forward(x);
    const Tensor lp = log_softmax_forward(x);
    const CrossEntropyResult ce = cross_entropy_forward(x, targets);
    const LayerNormResult ln = layer_norm_forward(x, w, w, 1e-5);
    const LayerNormGrads lg = layer_norm_backward(dy, x, w, ln.mean, ln.rstd);
    Tensor into = x.clone();
    layer_norm_backward_into(dy, x, w, ln.mean, ln.rstd, into);
    const Tensor emb = embedding_backward(dy, ids, 5);
    return std::vector<Tensor>{p,
                               softmax_backward(p, dy),
                               lp,
                               log_softmax_backward(lp, dy),
                               Tensor::scalar(ce.loss, DType::f64),
                               cross_entropy_backward(ce.probs, targets, ce.count, 1.0),
                               ln.y,
                               lg.dx,
                               lg.dweight,
                               lg.dbias,
                               into,
                               gelu_forward(x),
                               gelu_backward(x, dy),
                               bias_gelu_forward(x.clone(), w, true).y,
                               bias_gelu_forward(x.clone(), w, true).slope_values(),
                               gelu_backward_with_slope(dy, x, true).dh,
                               gelu_backward_with_slope(dy, x, true).column_sums,
                               add_layer_norm_forward(x, dy, w, w, 1e-5).sum,
                               add_layer_norm_forward(x, dy, w, w, 1e-5).norm.y,
                               emb};
  });
}

}  // namespace
}  // namespace headlab::core

// Neural-network ops: cross-entropy, softmax masks, layer norm, embedding, masked fill, dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"
#include "test_util.h"

namespace headlab::autograd {
namespace {

using testing::all_near;
using testing::grad_of;
using testing::message_of;
using testing::param;
using testing::tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(CrossEntropy, HugeLogitsGiveExactLossAndGradientInFloat32) {
  // Row 0 puts all mass on its target (loss 0); row 1 is 1e4 away from it.
  Variable logits = param({1e4, 0, -1e4, 0, 1e4, 0}, {2, 3}, DType::f32);
  Variable loss = cross_entropy(logits, std::vector<int32_t>{0, 0});
  EXPECT_EQ(loss.shape(), (Shape{}));
  EXPECT_EQ(loss.value().item(), 5000.0);  // (0 + 1e4) / 2, exactly
  loss.backward();
  EXPECT_TRUE(all_near(grad_of(logits), {0, 0, 0, -0.5, 0.5, 0}, 0.0));
}

TEST(CrossEntropy, InDoubleANearlyCertainTargetStillGetsItsGradient) {
  // p(target) = 1 - 2.5e-9 rounds to 1 in float32: the float32 gradient of the
  // target's logit is 0 while the others' are not. In double it is minus
  // their sum, as the exact gradient; both come back as float32.
  const std::vector<double> values = {0, -20.5, -20.5};
  const double other = std::exp(-20.5) / (1 + 2 * std::exp(-20.5));
  Variable f32 = param(values, {1, 3}, DType::f32), f64 = param(values, {1, 3}, DType::f32);
  cross_entropy(f32, std::vector<int32_t>{0}).backward();
  Variable loss = cross_entropy(f64, std::vector<int32_t>{0}, DType::f64);
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  EXPECT_EQ(f64.grad().dtype(), DType::f32);
  EXPECT_EQ(grad_of(f32)[0], 0.0);
  EXPECT_NEAR(grad_of(f64)[0], -2 * other, 1e-6 * other);
  EXPECT_NEAR(grad_of(f64)[1], other, 1e-6 * other);
  EXPECT_NEAR(loss.value().item(), std::log1p(2 * std::exp(-20.5)), 1e-6 * other);
}

TEST(CrossEntropy, EqualsMinusTheMeanLogSoftmaxOfTheTargets) {
  const Tensor x = tensor({0.1, -2, 3, 0.5, 0.5, 0.5, 4, 1, -1, 2, 2, 0}, {4, 3});
  const std::vector<int32_t> t = {2, -1, 0, 1};
  const double loss = cross_entropy(Variable(x), t).value().item();
  const Tensor ls = log_softmax(Variable(x)).value();
  const double expected = -(ls.at({0, 2}) + ls.at({2, 0}) + ls.at({3, 1})) / 3.0;
  EXPECT_NEAR(loss, expected, 1e-14);
}

TEST(CrossEntropy, IgnoredRowsGetNoGradientAndAllIgnoredGivesZero) {
  Variable x = param({1, 2, 3, 4}, {2, 2});
  Variable loss = cross_entropy(x, std::vector<int32_t>{-1, 1});
  loss.backward();
  const std::vector<double> g = grad_of(x);
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  EXPECT_NEAR(g[2] + g[3], 0.0, 1e-15);

  Variable y = param({1, 2, 3, 4}, {2, 2});
  Variable none = cross_entropy(y, std::vector<int32_t>{-1, -1});
  EXPECT_EQ(none.value().item(), 0.0);
  none.backward();
  EXPECT_TRUE(all_near(grad_of(y), {0, 0, 0, 0}, 0.0));
}

TEST(CrossEntropy, BadTargetsThrowNamingTheValue) {
  Variable x = param({1, 2, 3, 4}, {2, 2});
  const std::string msg = message_of<std::invalid_argument>([&] { cross_entropy(x, std::vector<int32_t>{0, 5}); });
  EXPECT_NE(msg.find("target 5"), std::string::npos) << msg;
  EXPECT_THROW(cross_entropy(x, std::vector<int32_t>{0}), std::invalid_argument);
  EXPECT_THROW(cross_entropy(x, std::vector<int32_t>{0, -2}), std::invalid_argument);
}

TEST(Softmax, MaskedEntriesAreExactlyZeroAndAFullyMaskedRowIsNotNaN) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = tensor({0, 1, 0, 1, 1, 1}, {2, 3});
  Variable p = softmax(masked_fill(x, mask, -kInf));
  const std::vector<double> v = p.value().to_vector();
  EXPECT_EQ(v[1], 0.0);
  EXPECT_NEAR(v[0] + v[2], 1.0, 1e-15);
  EXPECT_TRUE(all_near({v[3], v[4], v[5]}, {0, 0, 0}, 0.0));
  p.backward(tensor({1, 1, 1, 1, 1, 1}, {2, 3}));
  for (double g : grad_of(x)) EXPECT_TRUE(std::isfinite(g));
}

TEST(Softmax, OverANonLastAxisNormalizesThatAxis) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor s = softmax(x, 0).value();
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(s.at({0, j}) + s.at({1, j}), 1.0, 1e-15);
  EXPECT_NEAR(s.at({1, 0}), 1.0 / (1.0 + std::exp(-3.0)), 1e-15);
}

TEST(LayerNorm, NormalizesEachRowThenAppliesWeightAndBias) {
  Variable x = param({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  Variable w = param({1, 1, 2, 2}, {4});
  Variable b = param({0, 1, 0, 1}, {4});
  const Tensor y = layer_norm(x, w, b, 0.0).value();
  // Row 0: mean 2.5, var 1.25.
  const double r = 1.0 / std::sqrt(1.25);
  EXPECT_TRUE(all_near(y.to_vector(), {-1.5 * r, -0.5 * r + 1, 1.0 * r, 3.0 * r + 1, -1.5 * r, -0.5 * r + 1, 1.0 * r,
                                       3.0 * r + 1},
                       1e-12));
}

TEST(LayerNorm, GradientsOfWeightAndBiasSumOverRows) {
  Variable x = param({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  Variable w = param({1, 1, 1, 1}, {4});
  Variable b = param({0, 0, 0, 0}, {4});
  sum(layer_norm(x, w, b, 0.0)).backward();
  EXPECT_TRUE(all_near(grad_of(b), {2, 2, 2, 2}));
  const double r = 1.0 / std::sqrt(1.25);
  EXPECT_TRUE(all_near(grad_of(w), {-3 * r, -r, r, 3 * r}, 1e-12));  // sum of xhat over the two rows
  EXPECT_TRUE(all_near(grad_of(x), std::vector<double>(8, 0.0), 1e-12));  // a row sum is invariant
}

TEST(Embedding, GathersRowsAndScatterAddsRepeatedIds) {
  Variable w = param({0, 1, 10, 11, 20, 21}, {3, 2});
  Variable y = embedding(w, std::vector<int32_t>{2, 0, 2, 2}, {2, 2});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_TRUE(all_near(y.value().to_vector(), {20, 21, 0, 1, 20, 21, 20, 21}));
  y.backward(tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  EXPECT_TRUE(all_near(grad_of(w), {3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}));
}

TEST(Embedding, AnIdOutOfRangeThrowsNamingTheIdAndTheVocabulary) {
  Variable w = param({0, 1, 10, 11, 20, 21}, {3, 2});
  std::string msg = message_of<std::invalid_argument>([&] { embedding(w, std::vector<int32_t>{0, 7}, {2}); });
  EXPECT_NE(msg.find("id 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  msg = message_of<std::invalid_argument>([&] { embedding(w, std::vector<int32_t>{-1}, {1}); });
  EXPECT_NE(msg.find("id -1"), std::string::npos) << msg;
  EXPECT_THROW(embedding(w, std::vector<int32_t>{0, 1}, {3}), std::invalid_argument);
}

TEST(MaskedFill, FillsWhereTheBroadcastMaskIsSetAndBlocksTheGradient) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable y = masked_fill(x, tensor({1, 0}, {2, 1}, DType::f32), -9.0);
  EXPECT_TRUE(all_near(y.value().to_vector(), {-9, -9, -9, 4, 5, 6}));
  sum(y).backward();
  EXPECT_TRUE(all_near(grad_of(x), {0, 0, 0, 1, 1, 1}));
}

TEST(MaskedFill, AMaskThatDoesNotBroadcastToXThrows) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_THROW(masked_fill(x, tensor({1, 0}, {2}), 0.0), std::invalid_argument);
  EXPECT_THROW(masked_fill(x, Tensor::zeros({2, 2, 3}, DType::f64), 0.0), std::invalid_argument);
}

TEST(Dropout, TheSameSeedGivesTheSameMask) {
  Variable x(Tensor::ones({64}, DType::f64), true);
  core::Generator g1(5), g2(5);
  const Tensor a = dropout(x, 0.5, g1, true).value();
  const Tensor b = dropout(x, 0.5, g2, true).value();
  EXPECT_EQ(core::max_abs_diff(a, b), 0.0);
  core::Generator g3(6);
  EXPECT_GT(core::max_abs_diff(a, dropout(x, 0.5, g3, true).value()), 0.0);
}

TEST(Dropout, KeepsAboutOneMinusPScaledUpAndGradientFollowsTheMask) {
  Variable x(Tensor::ones({10000}, DType::f64), true);
  core::Generator gen(11);
  Variable y = dropout(x, 0.25, gen, true);
  const std::vector<double> v = y.value().to_vector();
  int64_t kept = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::abs(e - 4.0 / 3.0) < 1e-15);
    kept += e != 0.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000.0, 0.75, 0.02);
  sum(y).backward();
  EXPECT_TRUE(all_near(grad_of(x), v, 0.0));
}

TEST(Dropout, IsTheIdentityWhenNotTrainingOrPIsZero) {
  Variable x = param({1, 2, 3}, {3});
  core::Generator gen(1);
  EXPECT_EQ(dropout(x, 0.5, gen, false).node(), x.node());
  EXPECT_EQ(dropout(x, 0.0, gen, true).node(), x.node());
  EXPECT_THROW(dropout(x, 1.5, gen, true), std::invalid_argument);
  EXPECT_THROW(dropout(x, -0.1, gen, true), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::autograd

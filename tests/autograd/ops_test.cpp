// Elementwise, reduction, matmul and shape ops: forward values and hand-computed gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "test_util.h"

namespace headlab::autograd {
namespace {

using testing::all_near;
using testing::grad_of;
using testing::param;
using testing::tensor;

TEST(Add, BroadcastGradientIsSummedBackToEachInputShape) {
  Variable a = param({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable b = param({10, 20, 30}, {3});
  Variable y = a + b;
  EXPECT_TRUE(all_near(y.value().to_vector(), {11, 22, 33, 14, 25, 36}));
  y.backward(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(all_near(grad_of(a), {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_TRUE(all_near(grad_of(b), {5, 7, 9}));
}

TEST(Mul, BothOperandsBroadcastAndGetProductGradients) {
  Variable a = param({1, 2}, {2, 1});
  Variable b = param({3, 4, 5}, {1, 3});
  sum(a * b).backward();
  EXPECT_TRUE(all_near(grad_of(a), {12, 12}));  // sum of b per row
  EXPECT_TRUE(all_near(grad_of(b), {3, 3, 3}));  // sum of a per column
}

TEST(Div, GradientOfNumeratorAndDenominator) {
  Variable a = param({6}, {1});
  Variable b = param({3}, {1});
  sum(a / b).backward();
  EXPECT_TRUE(all_near(grad_of(a), {1.0 / 3}));
  EXPECT_TRUE(all_near(grad_of(b), {-6.0 / 9}));
}

TEST(Relu, GradientIsZeroWhereTheInputIsNegative) {
  Variable x = param({-1, 2, -3, 4}, {4});
  sum(relu(x)).backward();
  EXPECT_TRUE(all_near(grad_of(x), {0, 1, 0, 1}));
}

TEST(Gelu, ExactErfFormValues) {
  Variable x = param({0, 1, -1}, {3});
  Variable y = gelu(x);
  EXPECT_TRUE(all_near(y.value().to_vector(), {0, 0.8413447460685429, -0.15865525393145707}, 1e-15));
  sum(y).backward();
  // Phi(x) + x phi(x)
  EXPECT_TRUE(all_near(grad_of(x), {0.5, 0.8413447460685429 + 0.24197072451914337,
                                    0.15865525393145707 - 0.24197072451914337},
                       1e-15));
}

TEST(Sum, OverSeveralAxesSpreadsTheGradientBack) {
  Variable x = param({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  Variable y = sum(x, {0, 2});
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_TRUE(all_near(y.value().to_vector(), {1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12}));
  y.backward(tensor({1, 10, 100}, {3}));
  EXPECT_TRUE(all_near(grad_of(x), {1, 1, 10, 10, 100, 100, 1, 1, 10, 10, 100, 100}));
}

TEST(Mean, KeepdimGradientIsOneOverTheCount) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable y = mean(x, {1}, true);
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  EXPECT_TRUE(all_near(y.value().to_vector(), {2, 5}));
  sum(y).backward();
  EXPECT_TRUE(all_near(grad_of(x), std::vector<double>(6, 1.0 / 3), 1e-15));
}

TEST(Max, GradientGoesToTheFirstMaximumOnTies) {
  Variable x = param({1, 3, 3, 2, 9, 0}, {2, 3});
  Variable y = max(x, 1);
  EXPECT_TRUE(all_near(y.value().to_vector(), {3, 9}));
  y.backward(tensor({5, 7}, {2}));
  EXPECT_TRUE(all_near(grad_of(x), {0, 5, 0, 0, 7, 0}));
}

TEST(Matmul, GradientsAreGTimesBTransposedAndATransposedTimesG) {
  Variable a = param({1, 2, 3, 4}, {2, 2});
  Variable b = param({5, 6, 7, 8}, {2, 2});
  Variable y = matmul(a, b);
  EXPECT_TRUE(all_near(y.value().to_vector(), {19, 22, 43, 50}));
  sum(y).backward();
  EXPECT_TRUE(all_near(grad_of(a), {11, 15, 11, 15}));  // row sums of b
  EXPECT_TRUE(all_near(grad_of(b), {4, 4, 6, 6}));      // column sums of a
}

TEST(Matmul, SharedWeightGradientSumsOverTheBatch) {
  // x [2, 1, 2] @ w [2, 1]: dw = sum over batch of x^T g.
  Variable x = param({1, 2, 3, 4}, {2, 1, 2});
  Variable w = param({1, 1}, {2, 1});
  sum(matmul(x, w)).backward();
  EXPECT_EQ(w.grad().shape(), (Shape{2, 1}));
  EXPECT_TRUE(all_near(grad_of(w), {4, 6}));
}

TEST(Matmul, VectorTimesVectorIsADotProduct) {
  Variable a = param({1, 2, 3}, {3});
  Variable b = param({4, 5, 6}, {3});
  Variable y = matmul(a, b);
  EXPECT_EQ(y.shape(), (Shape{}));
  EXPECT_DOUBLE_EQ(y.value().item(), 32);
  y.backward();
  EXPECT_TRUE(all_near(grad_of(a), {4, 5, 6}));
  EXPECT_TRUE(all_near(grad_of(b), {1, 2, 3}));
}

TEST(Shape, ReshapeTransposeAndSliceForwardAreViews) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(reshape(x, {3, 2}).value().shares_storage(x.value()));
  EXPECT_TRUE(transpose(x, 0, 1).value().shares_storage(x.value()));
  EXPECT_TRUE(slice(x, 1, 0, 2).value().shares_storage(x.value()));
  EXPECT_FALSE(transpose(x, 0, 1).value().is_contiguous());
}

TEST(Slice, BackwardScattersIntoZeros) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {6});
  Variable y = slice(x, 0, 1, 6, 2);  // elements 1, 3, 5
  EXPECT_TRUE(all_near(y.value().to_vector(), {2, 4, 6}));
  y.backward(tensor({10, 20, 30}, {3}));
  EXPECT_TRUE(all_near(grad_of(x), {0, 10, 0, 20, 0, 30}));
}

TEST(Permute, GradientComesBackInTheInputLayout) {
  Variable x = param({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  Variable y = permute(x, {2, 0, 1});
  EXPECT_EQ(y.shape(), (Shape{3, 1, 2}));
  y.backward(tensor({1, 2, 3, 4, 5, 6}, {3, 1, 2}));
  EXPECT_EQ(x.grad().shape(), (Shape{1, 2, 3}));
  EXPECT_TRUE(all_near(grad_of(x), {1, 3, 5, 2, 4, 6}));
}

TEST(Expand, GradientSumsOverTheBroadcastAxes) {
  Variable x = param({1, 2}, {2, 1});
  Variable y = expand(x, {3, 2, 4});
  EXPECT_EQ(y.shape(), (Shape{3, 2, 4}));
  sum(y).backward();
  EXPECT_TRUE(all_near(grad_of(x), {12, 12}));
}

TEST(Concat, JoinsAlongAnAxisAndSplitsTheGradient) {
  Variable a = param({1, 2}, {2, 1});
  Variable b = param({3, 4, 5, 6}, {2, 2});
  Variable y = concat({a, b}, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_TRUE(all_near(y.value().to_vector(), {1, 3, 4, 2, 5, 6}));
  y.backward(tensor({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(all_near(grad_of(a), {1, 4}));
  EXPECT_TRUE(all_near(grad_of(b), {2, 3, 5, 6}));
}

TEST(Concat, MismatchedShapesThrow) {
  Variable a = param({1, 2}, {2, 1});
  Variable b = param({1, 2, 3}, {3, 1});
  EXPECT_THROW(concat({a, b}, 1), std::invalid_argument);
  EXPECT_THROW(concat({}, 0), std::invalid_argument);
}

TEST(Split, PiecesAreSlicesWhoseGradientsAddUp) {
  Variable x = param({1, 2, 3, 4, 5}, {5});
  std::vector<Variable> p = split(x, {2, 3}, 0);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(all_near(p[1].value().to_vector(), {3, 4, 5}));
  sum(p[0] * 2.0 + sum(p[1] * 3.0)).backward();
  EXPECT_TRUE(all_near(grad_of(x), {2, 2, 6, 6, 6}));
  EXPECT_THROW(split(x, {2, 2}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::autograd

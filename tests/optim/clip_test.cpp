#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/threads.h"
#include "optim_test_util.h"

namespace headlab::optim {
namespace {

using testing::param;
using testing::set_grad;

std::vector<double> grad_of(const autograd::Variable& v) { return v.grad().to_vector(); }

TEST(ClipGradNorm, RescalesToMaxNormAndReturnsThePreClipNorm) {
  // Gradients (3, 4) and (12): global norm sqrt(9 + 16 + 144) = 13.
  const autograd::Variable a = param({0.0, 0.0});
  const autograd::Variable b = param({0.0});
  set_grad(a, {3.0, 4.0});
  set_grad(b, {12.0});
  const double norm = clip_grad_norm({a, b}, 6.5);
  EXPECT_DOUBLE_EQ(norm, 13.0);
  const double factor = 6.5 / (13.0 + 1e-6);
  EXPECT_EQ(grad_of(a), (std::vector<double>{3.0 * factor, 4.0 * factor}));
  EXPECT_EQ(grad_of(b), (std::vector<double>{12.0 * factor}));
  EXPECT_NEAR(grad_norm({a, b}), 6.5, 1e-6);
}

TEST(ClipGradNorm, LeavesGradientsAloneAtOrBelowMaxNorm) {
  const autograd::Variable a = param({0.0, 0.0});
  set_grad(a, {3.0, 4.0});
  EXPECT_DOUBLE_EQ(clip_grad_norm({a}, 5.0), 5.0);
  EXPECT_EQ(grad_of(a), (std::vector<double>{3.0, 4.0}));
  EXPECT_DOUBLE_EQ(clip_grad_norm({a}, 100.0), 5.0);
  EXPECT_EQ(grad_of(a), (std::vector<double>{3.0, 4.0}));
}

TEST(ClipGradNorm, SkipsParametersWithoutGradient) {
  const autograd::Variable a = param({0.0, 0.0});
  const autograd::Variable b = param({0.0});
  set_grad(a, {6.0, 8.0});
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 1.0), 10.0);
  EXPECT_FALSE(b.has_grad());
  EXPECT_NEAR(grad_of(a)[0], 0.6, 1e-7);
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedWithoutScaling) {
  const autograd::Variable a = param({0.0, 0.0});
  set_grad(a, {std::numeric_limits<double>::infinity(), 1.0});
  EXPECT_TRUE(std::isinf(clip_grad_norm({a}, 1.0)));
  EXPECT_EQ(grad_of(a)[1], 1.0);
  set_grad(a, {std::nan(""), 1.0});
  EXPECT_TRUE(std::isnan(clip_grad_norm({a}, 1.0)));
  EXPECT_EQ(grad_of(a)[1], 1.0);
}

TEST(ClipGradNorm, AddsFloatGradientsInDouble) {
  const autograd::Variable a = param({0.0, 0.0}, core::DType::f32);
  const autograd::Variable b = param({0.0});
  set_grad(a, {3.0, 4.0});
  set_grad(b, {12.0});
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 26.0), 13.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 1.0), 13.0);
  EXPECT_NEAR(a.grad().to_vector()[0], 3.0 / 13.0, 1e-7);
  EXPECT_EQ(a.grad().dtype(), core::DType::f32);
}

TEST(ClipGradNorm, GradientsSharingStorageAreEachScaledOnce) {
  const autograd::Variable a = param({0.0, 0.0});
  const autograd::Variable b = param({0.0, 0.0});
  const core::Tensor shared = core::Tensor::from_vector({3.0, 4.0}, {2}, core::DType::f64);
  a.set_grad(shared);
  b.set_grad(shared);
  const double norm = clip_grad_norm({a, b}, 1.0);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(50.0));
  const double factor = 1.0 / (std::sqrt(50.0) + 1e-6);
  EXPECT_EQ(grad_of(a), (std::vector<double>{3.0 * factor, 4.0 * factor}));
  EXPECT_EQ(grad_of(b), (std::vector<double>{3.0 * factor, 4.0 * factor}));
}

TEST(ClipGradNorm, MaxNormMustBePositiveAndFinite) {
  const autograd::Variable a = param({1.0});
  set_grad(a, {1.0});
  EXPECT_THROW(clip_grad_norm({a}, 0.0), std::invalid_argument);
  EXPECT_THROW(clip_grad_norm({a}, -1.0), std::invalid_argument);
  EXPECT_THROW(clip_grad_norm({a}, std::numeric_limits<double>::infinity()), std::invalid_argument);
}

TEST(ClipGradNorm, NormDoesNotDependOnThreadCount) {
  const int64_t n = 3 * core::kParallelGrain + 11;
  std::vector<double> g(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.37 * static_cast<double>(i)) * 1e3;
  const autograd::Variable a = param(std::vector<double>(g.size(), 0.0));
  set_grad(a, g);
  core::set_num_threads(1);
  const double one = grad_norm({a});
  core::set_num_threads(2);
  const double two = grad_norm({a});
  core::set_num_threads(0);
  EXPECT_EQ(one, two);
  double sum = 0.0;
  for (const double x : g) sum += x * x;
  EXPECT_NEAR(one, std::sqrt(sum), 1e-9 * std::sqrt(sum));
}

}  // namespace
}  // namespace headlab::optim

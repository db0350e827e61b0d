// Each optimizer minimizes a quadratic and the Rosenbrock function, with
// gradients written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

namespace headlab::optim {
namespace {

using testing::param;
using testing::set_grad;
using testing::values;

using GradFn = std::function<std::vector<double>(const std::vector<double>&)>;

void run(Optimizer& opt, const autograd::Variable& p, const GradFn& grad, int steps) {
  for (int t = 0; t < steps; ++t) {
    opt.zero_grad();
    set_grad(p, grad(values(p)));
    opt.step();
  }
}

// f(x) = sum_i a_i (x_i - c_i)^2 / 2, an ill-conditioned bowl with minimum c.
const std::vector<double> kCenter{1.0, -2.0, 0.5, 3.0};
std::vector<double> quadratic_grad(const std::vector<double>& x) {
  const std::vector<double> a{1.0, 10.0, 0.3, 4.0};
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) g[i] = a[i] * (x[i] - kCenter[i]);
  return g;
}

// f(x, y) = (1 - x)^2 + 100 (y - x^2)^2, minimum at (1, 1).
std::vector<double> rosenbrock_grad(const std::vector<double>& p) {
  const double x = p[0];
  const double y = p[1];
  return {-2.0 * (1.0 - x) - 400.0 * x * (y - x * x), 200.0 * (y - x * x)};
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Convergence, SGDWithMomentumMinimizesQuadratic) {
  const autograd::Variable p = param({0.0, 0.0, 0.0, 0.0});
  SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(0.05).momentum(0.9));
  run(sgd, p, quadratic_grad, 1000);
  expect_near_all(values(p), kCenter, 1e-10);
}

TEST(Convergence, SGDWithNesterovMinimizesQuadratic) {
  const autograd::Variable p = param({0.0, 0.0, 0.0, 0.0});
  SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(0.05).momentum(0.9).nesterov(true));
  run(sgd, p, quadratic_grad, 1000);
  expect_near_all(values(p), kCenter, 1e-10);
}

TEST(Convergence, AdamMinimizesQuadratic) {
  const autograd::Variable p = param({0.0, 0.0, 0.0, 0.0});
  Adam adam(std::vector<autograd::Variable>{p}, AdamOptions(0.05));
  run(adam, p, quadratic_grad, 3000);
  expect_near_all(values(p), kCenter, 1e-8);
}

TEST(Convergence, AdamWWithoutDecayMinimizesQuadratic) {
  const autograd::Variable p = param({0.0, 0.0, 0.0, 0.0});
  AdamW adamw(std::vector<autograd::Variable>{p}, AdamWOptions(0.05).weight_decay(0.0));
  run(adamw, p, quadratic_grad, 3000);
  expect_near_all(values(p), kCenter, 1e-8);
}

TEST(Convergence, AdamFindsRosenbrockMinimumFromMinusOnePointFiveTwo) {
  const autograd::Variable p = param({-1.5, 2.0});
  Adam adam(std::vector<autograd::Variable>{p}, AdamOptions(0.01));
  run(adam, p, rosenbrock_grad, 5000);
  expect_near_all(values(p), {1.0, 1.0}, 1e-3);
}

TEST(Convergence, SGDWithNesterovFindsRosenbrockMinimum) {
  const autograd::Variable p = param({-1.5, 2.0});
  SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(5e-4).momentum(0.9).nesterov(true));
  run(sgd, p, rosenbrock_grad, 5000);
  expect_near_all(values(p), {1.0, 1.0}, 1e-3);
}

}  // namespace
}  // namespace headlab::optim

#include "optim/sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "core/threads.h"
#include "optim_test_util.h"

namespace headlab::optim {
namespace {

using testing::param;
using testing::set_grad;
using testing::SmallProblem;
using testing::values;

struct SGDSettings {
  double lr = 0.1;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

// PyTorch's torch.optim.SGD, written out for one scalar over `steps` steps:
//   g = g + wd p;  b = g (first step) else mu b + (1 - tau) g
//   g = g + mu b (Nesterov) or b;  p = p - lr g
std::vector<std::vector<double>> reference_sgd(const SmallProblem& problem, const SGDSettings& s, int steps) {
  std::vector<double> p = problem.start;
  std::vector<double> b(p.size(), 0.0);
  std::vector<std::vector<double>> trajectory;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> grad = problem.grad(p);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + s.weight_decay * p[i];
      if (s.momentum != 0.0) {
        b[i] = t == 1 ? g : s.momentum * b[i] + (1.0 - s.dampening) * g;
        g = s.nesterov ? g + s.momentum * b[i] : b[i];
      }
      p[i] = p[i] - s.lr * g;
    }
    trajectory.push_back(p);
  }
  return trajectory;
}

void expect_first_three_steps_match(const SGDSettings& s) {
  const SmallProblem problem;
  const autograd::Variable p = param(problem.start);
  SGD sgd(
      std::vector<autograd::Variable>{p},
      SGDOptions(s.lr).momentum(s.momentum).dampening(s.dampening).nesterov(s.nesterov).weight_decay(s.weight_decay));
  const auto expected = reference_sgd(problem, s, 3);
  for (int t = 0; t < 3; ++t) {
    set_grad(p, problem.grad(values(p)));
    sgd.step();
    const std::vector<double> got = values(p);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], expected[t][i], 1e-12) << "step " << t + 1 << ", element " << i;
    }
  }
  EXPECT_EQ(sgd.step_count(), 3);
}

TEST(SGD, PlainStepIsParamMinusLrTimesGradient) {
  // By hand: p = 0.5, g = 1 * 0.5 - 0.2 = 0.3, lr 0.1 -> 0.5 - 0.03 = 0.47.
  const autograd::Variable p = param({0.5});
  SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(0.1));
  set_grad(p, {0.3});
  sgd.step();
  EXPECT_NEAR(values(p)[0], 0.47, 1e-15);
}

TEST(SGD, FirstThreeStepsMatchFormulas) { expect_first_three_steps_match({.lr = 0.1}); }

TEST(SGD, FirstThreeStepsMatchFormulasWithWeightDecay) {
  expect_first_three_steps_match({.lr = 0.1, .weight_decay = 0.05});
}

TEST(SGD, FirstThreeStepsMatchFormulasWithMomentum) { expect_first_three_steps_match({.lr = 0.1, .momentum = 0.9}); }

TEST(SGD, FirstThreeStepsMatchFormulasWithMomentumDampeningAndDecay) {
  expect_first_three_steps_match({.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01});
}

TEST(SGD, FirstThreeStepsMatchFormulasWithNesterov) {
  expect_first_three_steps_match({.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.02});
}

TEST(SGD, MomentumBufferStartsAsTheFirstGradient) {
  // By hand, momentum 0.9, lr 1: step 1 b = 1, p = -1; step 2 b = 0.9 + 1, p = -2.9.
  const autograd::Variable p = param({0.0});
  SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(1.0).momentum(0.9));
  set_grad(p, {1.0});
  sgd.step();
  EXPECT_DOUBLE_EQ(values(p)[0], -1.0);
  set_grad(p, {1.0});
  sgd.step();
  EXPECT_DOUBLE_EQ(values(p)[0], -2.9);
}

TEST(SGD, ParameterWithoutGradientIsSkipped) {
  const autograd::Variable a = param({1.0, 2.0});
  const autograd::Variable b = param({3.0});
  SGD sgd(NamedParameters{{"a", a}, {"b", b}}, SGDOptions(0.5).momentum(0.9));
  set_grad(a, {1.0, 1.0});
  sgd.step();
  EXPECT_EQ(values(a), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(values(b), (std::vector<double>{3.0}));
  EXPECT_EQ(sgd.param_step_count("a"), 1);
  EXPECT_EQ(sgd.param_step_count("b"), 0);
}

TEST(SGD, ZeroGradDropsEveryGradient) {
  const autograd::Variable a = param({1.0});
  SGD sgd(std::vector<autograd::Variable>{a});
  set_grad(a, {1.0});
  sgd.zero_grad();
  EXPECT_FALSE(a.has_grad());
  sgd.step();  // nothing to do
  EXPECT_EQ(values(a), (std::vector<double>{1.0}));
}

TEST(SGD, NesterovWithoutMomentumOrWithDampeningIsRejected) {
  const autograd::Variable a = param({1.0});
  const std::vector<autograd::Variable> params{a};
  EXPECT_THROW(SGD(params, SGDOptions(0.1).nesterov(true)), std::invalid_argument);
  EXPECT_THROW(SGD(params, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)), std::invalid_argument);
  EXPECT_THROW(SGD(params, SGDOptions(-0.1)), std::invalid_argument);
  EXPECT_THROW(SGD(params, SGDOptions(0.1).momentum(-0.5)), std::invalid_argument);
}

TEST(SGD, GradientNotMatchingAReplacedValueThrowsAndLeavesParametersUnchanged) {
  // Variable::set_grad checks shapes; a value replaced through mutable_value()
  // after its gradient arrived is caught by step() before any update.
  const autograd::Variable a = param({1.0, 2.0});
  const autograd::Variable b = param({3.0});
  SGD sgd(NamedParameters{{"a", a}, {"b", b}}, SGDOptions(0.5));
  set_grad(a, {1.0, 1.0});
  set_grad(b, {1.0});
  b.mutable_value() = core::Tensor::zeros({2}, core::DType::f64);
  try {
    sgd.step();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(values(a), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(sgd.step_count(), 0);
}

TEST(SGD, ResultDoesNotDependOnThreadCount) {
  const int64_t n = 2 * core::kParallelGrain + 3;
  std::vector<double> start(static_cast<std::size_t>(n));
  std::vector<double> grad(start.size());
  for (std::size_t i = 0; i < start.size(); ++i) {
    start[i] = std::sin(0.001 * static_cast<double>(i));
    grad[i] = std::cos(0.003 * static_cast<double>(i));
  }
  auto run = [&](int threads) {
    core::set_num_threads(threads);
    const autograd::Variable p = param(start);
    SGD sgd(std::vector<autograd::Variable>{p}, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
    for (int t = 0; t < 3; ++t) {
      set_grad(p, grad);
      sgd.step();
    }
    return values(p);
  };
  const std::vector<double> one = run(1);
  const std::vector<double> two = run(2);
  core::set_num_threads(0);
  EXPECT_EQ(one, two);
  EXPECT_NE(one, start);
}

}  // namespace
}  // namespace headlab::optim

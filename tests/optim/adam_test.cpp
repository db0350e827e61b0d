#include "optim/adam.h"

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

struct AdamCase {
  double lr = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // AdamW
};

// The published Adam / AdamW updates (PyTorch's documentation), one scalar at
// a time, returning p after each of `steps` steps:
//   Adam:  g = g + wd p          AdamW: p = p - lr wd p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p = p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
std::vector<std::vector<double>> reference_adam(const SmallProblem& problem, const AdamCase& s, int steps) {
  std::vector<double> p = problem.start;
  std::vector<double> m(p.size(), 0.0);
  std::vector<double> v(p.size(), 0.0);
  std::vector<std::vector<double>> trajectory;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> grad = problem.grad(p);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (s.decoupled) {
        p[i] = p[i] - s.lr * s.weight_decay * p[i];
      } else {
        g = g + s.weight_decay * p[i];
      }
      m[i] = s.beta1 * m[i] + (1.0 - s.beta1) * g;
      v[i] = s.beta2 * v[i] + (1.0 - s.beta2) * g * g;
      const double m_hat = m[i] / (1.0 - std::pow(s.beta1, t));
      const double v_hat = v[i] / (1.0 - std::pow(s.beta2, t));
      p[i] = p[i] - s.lr * m_hat / (std::sqrt(v_hat) + s.eps);
    }
    trajectory.push_back(p);
  }
  return trajectory;
}

void expect_first_three_steps_match(Optimizer& opt, const autograd::Variable& p, const AdamCase& s) {
  const SmallProblem problem;
  const auto expected = reference_adam(problem, s, 3);
  for (int t = 0; t < 3; ++t) {
    set_grad(p, problem.grad(values(p)));
    opt.step();
    const std::vector<double> got = values(p);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], expected[t][i], 1e-12) << "step " << t + 1 << ", element " << i;
    }
  }
}

TEST(Adam, DefaultsArePyTorchs) {
  const AdamOptions adam;
  EXPECT_EQ(adam.lr(), 1e-3);
  EXPECT_EQ(adam.beta1(), 0.9);
  EXPECT_EQ(adam.beta2(), 0.999);
  EXPECT_EQ(adam.eps(), 1e-8);
  EXPECT_EQ(adam.weight_decay(), 0.0);
  const AdamWOptions adamw;
  EXPECT_EQ(adamw.lr(), 1e-3);
  EXPECT_EQ(adamw.weight_decay(), 0.01);
  EXPECT_EQ(AdamWOptions().lr(3e-4).betas(0.8, 0.95).weight_decay(0.1).beta2(), 0.95);
}

TEST(Adam, FirstStepMovesEachParameterByAboutLr) {
  // By hand: at t = 1, m_hat = g and v_hat = g^2, so p -= lr * g / (|g| + eps).
  const autograd::Variable p = param({1.0, 1.0});
  Adam adam(std::vector<autograd::Variable>{p}, AdamOptions(0.1));
  set_grad(p, {0.5, -2.0});
  adam.step();
  EXPECT_NEAR(values(p)[0], 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(values(p)[1], 1.0 + 0.1 * 2.0 / (2.0 + 1e-8), 1e-15);
}

TEST(Adam, FirstThreeStepsMatchFormulas) {
  const AdamCase s{.lr = 0.1};
  const autograd::Variable p = param(SmallProblem().start);
  Adam adam(std::vector<autograd::Variable>{p}, AdamOptions(s.lr));
  expect_first_three_steps_match(adam, p, s);
}

TEST(Adam, FirstThreeStepsMatchFormulasWithL2WeightDecayAndOtherBetas) {
  const AdamCase s{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.1};
  const autograd::Variable p = param(SmallProblem().start);
  Adam adam(std::vector<autograd::Variable>{p},
            AdamOptions(s.lr).betas(s.beta1, s.beta2).eps(s.eps).weight_decay(s.weight_decay));
  expect_first_three_steps_match(adam, p, s);
}

TEST(AdamW, FirstThreeStepsMatchFormulasWithDecoupledWeightDecay) {
  const AdamCase s{.lr = 0.1, .weight_decay = 0.01, .decoupled = true};
  const autograd::Variable p = param(SmallProblem().start);
  AdamW adamw(std::vector<autograd::Variable>{p}, AdamWOptions(s.lr));  // default weight decay 0.01
  expect_first_three_steps_match(adamw, p, s);
}

TEST(AdamW, FirstThreeStepsMatchFormulasWithLargeDecayAndEps) {
  const AdamCase s{.lr = 0.02, .beta1 = 0.5, .beta2 = 0.9, .eps = 0.1, .weight_decay = 0.5, .decoupled = true};
  const autograd::Variable p = param(SmallProblem().start);
  AdamW adamw(std::vector<autograd::Variable>{p},
              AdamWOptions(s.lr).betas(s.beta1, s.beta2).eps(s.eps).weight_decay(s.weight_decay));
  expect_first_three_steps_match(adamw, p, s);
}

TEST(AdamW, DecayIsDecoupledFromTheGradient) {
  // With a zero gradient the moments stay 0, so AdamW only shrinks p by
  // (1 - lr wd) while Adam's L2 term turns into a step of about lr.
  const autograd::Variable a = param({2.0});
  const autograd::Variable b = param({2.0});
  AdamW adamw(std::vector<autograd::Variable>{a}, AdamWOptions(0.1).weight_decay(0.5));
  Adam adam(std::vector<autograd::Variable>{b}, AdamOptions(0.1).weight_decay(0.5));
  set_grad(a, {0.0});
  set_grad(b, {0.0});
  adamw.step();
  adam.step();
  EXPECT_DOUBLE_EQ(values(a)[0], 2.0 * (1.0 - 0.1 * 0.5));
  EXPECT_NEAR(values(b)[0], 2.0 - 0.1, 1e-8);
}

TEST(Adam, SkippedParameterKeepsItsOwnBiasCorrection) {
  // b gets its first gradient at the optimizer's third step; its update is
  // still a first step (t = 1), as in PyTorch.
  const autograd::Variable a = param({0.0});
  const autograd::Variable b = param({1.0});
  Adam adam(NamedParameters{{"a", a}, {"b", b}}, AdamOptions(0.1));
  for (int t = 0; t < 2; ++t) {
    set_grad(a, {1.0});
    adam.step();
  }
  EXPECT_EQ(values(b)[0], 1.0);
  EXPECT_EQ(adam.param_step_count("b"), 0);
  adam.zero_grad();
  set_grad(b, {4.0});
  adam.step();
  EXPECT_NEAR(values(b)[0], 1.0 - 0.1 * 4.0 / (4.0 + 1e-8), 1e-15);
  EXPECT_EQ(adam.param_step_count("a"), 2);
  EXPECT_EQ(adam.param_step_count("b"), 1);
  EXPECT_EQ(adam.step_count(), 3);
}

TEST(Adam, FloatParametersFollowTheDoubleFormulasClosely) {
  const SmallProblem problem;
  const AdamCase s{.lr = 0.1, .weight_decay = 0.01, .decoupled = true};
  const autograd::Variable p = param(problem.start, core::DType::f32);
  AdamW adamw(std::vector<autograd::Variable>{p}, AdamWOptions(s.lr));
  const auto expected = reference_adam(problem, s, 3);
  for (int t = 0; t < 3; ++t) {
    set_grad(p, problem.grad(values(p)));
    adamw.step();
  }
  EXPECT_EQ(p.dtype(), core::DType::f32);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(values(p)[i], expected[2][i], 1e-5);
}

TEST(Adam, BadSettingsAreRejected) {
  const std::vector<autograd::Variable> params{param({1.0})};
  EXPECT_THROW(Adam(params, AdamOptions().betas(1.0, 0.999)), std::invalid_argument);
  EXPECT_THROW(Adam(params, AdamOptions().betas(0.9, -0.1)), std::invalid_argument);
  EXPECT_THROW(AdamW(params, AdamWOptions().eps(-1.0)), std::invalid_argument);
  EXPECT_THROW(AdamW(params, AdamWOptions().weight_decay(std::nan(""))), std::invalid_argument);
  EXPECT_THROW(Adam(std::vector<autograd::Variable>{}), std::invalid_argument);
}

TEST(AdamW, ResultDoesNotDependOnThreadCount) {
  const int64_t n = 2 * core::kParallelGrain + 5;
  std::vector<double> start(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < start.size(); ++i) start[i] = std::sin(0.01 * static_cast<double>(i));
  auto run = [&](int threads) {
    core::set_num_threads(threads);
    const autograd::Variable p = param(start);
    AdamW adamw(std::vector<autograd::Variable>{p}, AdamWOptions(0.01));
    for (int t = 0; t < 3; ++t) {
      std::vector<double> g = values(p);
      for (double& x : g) x = 3.0 * x - 0.5;
      set_grad(p, g);
      adamw.step();
    }
    return values(p);
  };
  const std::vector<double> one = run(1);
  const std::vector<double> two = run(2);
  core::set_num_threads(0);
  EXPECT_EQ(one, two);
  EXPECT_NE(one, start);
}

// step() updates all parameters in one parallel region over their
// concatenated elements, so a thread's share starts and ends inside
// parameters. Every element must still be updated exactly once, as it would
// be by an optimizer of its own, whatever the thread count; a strided
// parameter is updated through a contiguous copy written back afterwards.
TEST(AdamW, OneRegionOverManyParametersMatchesEachAlone) {
  const std::vector<int64_t> sizes{3, core::kParallelGrain - 1, 7, core::kParallelGrain + 3, 1};
  auto start = [](int64_t n, int64_t k) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.003 * static_cast<double>(i) + static_cast<double>(k));
    return v;
  };
  auto gradient = [](const std::vector<double>& p) {
    std::vector<double> g = p;
    for (double& x : g) x = 2.0 * x + 0.25;
    return g;
  };
  // A 4 x 6 parameter seen transposed: a strided view of its storage.
  const std::vector<double> matrix = start(24, 9);
  auto strided_param = [&] {
    const core::Tensor base = core::Tensor::from_vector(matrix, {4, 6}, core::DType::f64);
    return autograd::Variable(base.transpose(0, 1), true);
  };

  std::vector<std::vector<double>> alone;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const autograd::Variable p = param(start(sizes[k], static_cast<int64_t>(k)));
    AdamW opt(std::vector<autograd::Variable>{p}, AdamWOptions(0.01));
    for (int t = 0; t < 2; ++t) {
      set_grad(p, gradient(values(p)));
      opt.step();
    }
    alone.push_back(values(p));
  }
  const autograd::Variable lone_strided = strided_param();
  {
    AdamW opt(std::vector<autograd::Variable>{lone_strided}, AdamWOptions(0.01));
    for (int t = 0; t < 2; ++t) {
      set_grad(lone_strided, gradient(values(lone_strided)));
      opt.step();
    }
  }

  for (const int threads : {1, 2}) {
    core::set_num_threads(threads);
    std::vector<autograd::Variable> params;
    for (std::size_t k = 0; k < sizes.size(); ++k) params.push_back(param(start(sizes[k], static_cast<int64_t>(k))));
    params.push_back(strided_param());
    AdamW opt(params, AdamWOptions(0.01));
    for (int t = 0; t < 2; ++t) {
      for (const autograd::Variable& p : params) set_grad(p, gradient(values(p)));
      opt.step();
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      EXPECT_EQ(values(params[k]), alone[k]) << "parameter " << k << ", " << threads << " thread(s)";
    }
    EXPECT_FALSE(params.back().value().is_contiguous());
    EXPECT_EQ(values(params.back()), values(lone_strided)) << threads << " thread(s)";
    EXPECT_NE(values(params.back()), values(strided_param()));
  }
  core::set_num_threads(0);
}

}  // namespace
}  // namespace headlab::optim

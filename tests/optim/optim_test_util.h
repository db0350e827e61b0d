// Helpers for the optim tests: f64 parameters and hand-set gradients, so the
// tests need no op library.
#pragma once

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace headlab::optim::testing {

inline autograd::Variable param(const std::vector<double>& values, core::DType dtype = core::DType::f64) {
  return autograd::Variable(core::Tensor::from_vector(values, {static_cast<int64_t>(values.size())}, dtype), true);
}

inline autograd::Variable param_shaped(const core::Shape& shape) {
  return autograd::Variable(core::Tensor::zeros(shape, core::DType::f64), true);
}

inline std::vector<double> values(const autograd::Variable& v) { return v.value().to_vector(); }

inline void set_grad(const autograd::Variable& v, const std::vector<double>& g) {
  v.set_grad(core::Tensor::from_vector(g, v.shape(), v.dtype()));
}

// The fixed small problem of the hand-checked steps: the gradient at p of
// f(p) = sum_i (c_i / 2) p_i^2 - d_i p_i, that is g_i = c_i p_i - d_i.
struct SmallProblem {
  std::vector<double> start{0.5, -1.0, 2.0};
  std::vector<double> c{1.0, 3.0, 0.5};
  std::vector<double> d{0.2, -0.4, 1.0};

  std::vector<double> grad(const std::vector<double>& p) const {
    std::vector<double> g(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) g[i] = c[i] * p[i] - d[i];
    return g;
  }
};

}  // namespace headlab::optim::testing

// Small helpers for the autograd tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/variable.h"

namespace headlab::autograd::testing {

inline Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f64) {
  return Tensor::from_vector(values, shape, dtype);
}

// A leaf that requires a gradient.
inline Variable param(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f64) {
  return Variable(tensor(values, shape, dtype), true);
}

inline std::vector<double> grad_of(const Variable& v) { return v.grad().to_vector(); }

// Each element of `actual` within tol of `expected`, and the same length.
inline ::testing::AssertionResult all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                                           double tol = 1e-12) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " != expected " << expected.size();
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " != expected " << expected[i]
                                           << " (tol " << tol << ")";
  return ::testing::AssertionSuccess();
}

// The message of the exception `f` throws as E (empty if none).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace headlab::autograd::testing

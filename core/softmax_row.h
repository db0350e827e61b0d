// Internal: the softmax of one row, shared by the softmax family
// (nn_kernels.cpp) and fused attention (attention_kernels.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/vec_math.h"

namespace headlab::core::detail {

// e^x: the vectorizable fast_exp for float, libm for double (gradchecks).
inline float exp_of(float x) { return fast_exp(x); }
inline double exp_of(double x) { return std::exp(x); }

// x [C] -> y [C] (may alias x): y[c] = exp(x[c] - max) / sum. Entries of -inf
// give 0; a row entirely -inf gives 0s (and a sum of 0). Returns the row's
// max and sum for the callers that need them (cross-entropy). The sum
// accumulates in the row's own type (its terms lie in [0, 1], so float loses
// nothing that matters, and the loop runs at full vector width); simd
// reductions fix its order at compile time, so the bits never depend on the
// thread count or the run.
// softmax_row's work after the max: y = exp(x - m) / sum, given m, the
// max of x (a caller that computes its row while taking the max spares
// the max's pass). The same loops as softmax_row's, so the same bits.
//
// A float row of at most kShortRow (attention's rows at T <= 8) takes its
// exps in one vector loop and their sum in order afterwards. The loop below
// runs such a row as scalar code (with 16 lanes the whole row is the loop's
// remainder) and its sum is the same, in order: GCC's simd reduction holds
// at most one term per lane there and adds the lanes in order. That holds
// on any build whose vectors hold at least 8 floats (AVX and later).
// Same bits; tiny's attention forward took 0.73 of its time.
constexpr int64_t kShortRow = 8;

template <class T>
void softmax_row_from_max(const T* x, T* y, int64_t C, T m, double& sum) {
  if (m == -std::numeric_limits<T>::infinity()) {
    std::fill(y, y + C, T(0));
    sum = 0.0;
    return;
  }
  T s = 0;
  if constexpr (std::is_same_v<T, float>)
    if (C <= kShortRow) {
      float v[kShortRow], e[kShortRow];
      for (int64_t c = 0; c < kShortRow; ++c) v[c] = c < C ? x[c] : m;
#pragma omp simd
      for (int64_t c = 0; c < kShortRow; ++c) e[c] = exp_of(v[c] - m);
      for (int64_t c = 0; c < C; ++c) s += e[c];
      const float inv = 1.0f / s;
      for (int64_t c = 0; c < C; ++c) y[c] = e[c] * inv;
      sum = static_cast<double>(s);
      return;
    }
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c) {
    const T e = exp_of(x[c] - m);
    y[c] = e;
    s += e;
  }
  const T inv = T(1) / s;
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) y[c] *= inv;
  sum = static_cast<double>(s);
}

template <class T>
void softmax_row(const T* x, T* y, int64_t C, double& row_max, double& sum) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; ++c) m = x[c] > m ? x[c] : m;
  row_max = static_cast<double>(m);
  softmax_row_from_max(x, y, C, m, sum);
}

}  // namespace headlab::core::detail

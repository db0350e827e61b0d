// GELU kernels: alone (gelu_forward/backward), behind a Linear (with its
// slope, and with the Linear's bias added in the same pass). See
// nn_kernels_gelu.h for the shapes and contracts.
#include "core/nn_kernels_gelu.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/bf16_operands.h"
#include "core/gemm.h"
#include "core/nn_kernels_rows.h"
#include "core/vec_math.h"

namespace headlab::core {
namespace {

using detail::check_same;
using detail::check_vector;
using detail::parallel;
using detail::RowView;
using detail::rows_of;

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// Double keeps libm's erf (gradchecks compare against it); float uses the
// vectorizable normal CDF of vec_math.h, several times faster than erff.
inline double gelu_cdf(double x, double& pdf) {
  pdf = kInvSqrt2Pi * std::exp(-0.5 * x * x);
  return 0.5 * (1.0 + std::erf(x * kInvSqrt2));
}
inline float gelu_cdf(float x, float& pdf) { return detail::normal_cdf(x, pdf); }

// A slope as stored, as float: itself, or widened from bf16.
template <class T>
inline T widen(T x) { return x; }
inline float widen(bf16_t x) { return from_bf16(x); }

template <class T>
void gelu_fwd(const T* x, T* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel(n))
  for (int64_t i = 0; i < n; ++i) {
    T pdf;
    y[i] = x[i] * gelu_cdf(x[i], pdf);
  }
}

// RoundSlope (float only): the slope rounded to bf16 (see gelu_backward).
template <class T, bool RoundSlope = false>
void gelu_bwd(const T* x, const T* dy, T* dx, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel(n))
  for (int64_t i = 0; i < n; ++i) {
    T pdf;
    const T cdf = gelu_cdf(x[i], pdf);
    if constexpr (RoundSlope)
      dx[i] = dy[i] * from_bf16(to_bf16(cdf + x[i] * pdf));
    else
      dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

// Whether a float32 GELU's slope is kept rounded (bf16 mixed precision).
bool rounds_slope(const Tensor& t) { return t.dtype() == DType::f32 && gemm_precision() == GemmPrecision::bf16; }

// h [rows, C] -> y = gelu(h + bias) over h and, WithSlope, slope [rows, C]
// = gelu'(h + bias): one pass that reads the GEMM's product once. Each
// element on its own, so the bits never depend on the thread count. The
// slope is a template flag so that both loops stay branch-free and vectorize.
// With `y16` (float only), each row of y also goes rounded to bf16 there,
// for the Linear that reads y next (core/bf16_operands.h); with `slope16`
// (float only), the slope goes there rounded, and not to `slope`.
template <class T, bool WithSlope>
void bias_gelu_fwd(T* h, const T* bias, T* slope, RowView v, bf16_t* y16, bf16_t* slope16 = nullptr) {
  const int64_t C = v.cols;
#pragma omp parallel for schedule(static) if (parallel(v.rows * C))
  for (int64_t r = 0; r < v.rows; ++r) {
    thread_local std::vector<T> row;  // the row's slope, before it is rounded
    if (WithSlope && slope16 != nullptr && row.size() < static_cast<std::size_t>(C))
      row.resize(static_cast<std::size_t>(C));
    T* hr = h + r * C;
    T* sr = !WithSlope ? nullptr : slope16 != nullptr ? row.data() : slope + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const T x = hr[c] + bias[c];
      T pdf;
      const T cdf = gelu_cdf(x, pdf);
      hr[c] = x * cdf;
      if constexpr (WithSlope) sr[c] = cdf + x * pdf;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (y16) pack_bf16(hr, 1, C, C, y16 + r * C);
      if (WithSlope && slope16) pack_bf16(sr, 1, C, C, slope16 + r * C);
    }
  }
}

// dy, slope [rows, C] -> dh [rows, C] (which may be dy: each element is
// read before it is written) and, if sums, sums [C]. Threads own blocks of
// columns and walk the rows in order. With dh16 (float only), dh is not
// stored: each row's block goes rounded to dh16 instead, from the float
// values the sums add, while it is in cache.
template <class T, class S = T>
void gelu_slope_bwd(const T* dy, const S* slope, T* dh, T* sums, RowView v, bf16_t* dh16 = nullptr) {
  constexpr int64_t kCols = 256;
  const int64_t C = v.cols, blocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (parallel(v.rows * C) && blocks > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kCols, nc = std::min(kCols, C - c0);
    double acc[kCols] = {};
    T row[kCols];
    for (int64_t r = 0; r < v.rows; ++r) {
      const T* dyr = dy + r * C + c0;
      const S* sr = slope + r * C + c0;
      T* dr = dh16 != nullptr ? row : dh + r * C + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        dr[c] = dyr[c] * widen(sr[c]);
        acc[c] += static_cast<double>(dr[c]);
      }
      if constexpr (std::is_same_v<T, float>)
        if (dh16 != nullptr) pack_bf16(row, 1, nc, nc, dh16 + r * C + c0);
    }
    if (sums)
      for (int64_t c = 0; c < nc; ++c) sums[c0 + c] = static_cast<T>(acc[c]);
  }
}

}  // namespace

Tensor gelu_forward(const Tensor& x) {
  if (!x.defined()) throw std::invalid_argument("gelu_forward: the input tensor is undefined");
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gelu_fwd<T>(xc.data<T>(), y.data<T>(), x.numel());
  });
  return y;
}

Tensor gelu_backward(const Tensor& x, const Tensor& dy) {
  check_same(x, dy, "gelu_backward", "x", "dy");
  const Tensor xc = x.contiguous(), dyc = dy.contiguous();
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  if (rounds_slope(x)) {
    gelu_bwd<float, true>(xc.data<float>(), dyc.data<float>(), dx.data<float>(), x.numel());
    return dx;
  }
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gelu_bwd<T>(xc.data<T>(), dyc.data<T>(), dx.data<T>(), x.numel());
  });
  return dx;
}

GeluWithSlope bias_gelu_forward(Tensor h, const Tensor& bias, bool want_slope) {
  const char* op = "bias_gelu_forward";
  const RowView v = rows_of(h, op);
  if (!h.is_contiguous()) throw std::invalid_argument(std::string(op) + ": h must be contiguous (it is written over)");
  if (bias.defined()) check_vector(bias, v.cols, h.dtype(), op, "bias");
  bf16_t* y16 = bf16_copy_of_output(h, v.cols);
  // With or without a Bf16Operands scope, so that the bits are the same.
  const bool rounded = want_slope && rounds_slope(h);
  bf16_t* slope16 = nullptr;
  GeluWithSlope r{h, want_slope && !rounded ? Tensor::empty(h.shape(), h.dtype()) : Tensor(),
                  rounded ? spare_bf16_copy(v.rows, v.cols, &slope16) : Bf16Copy{}};
  dispatch(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor::zeros({v.cols}, h.dtype());
    if (want_slope)
      bias_gelu_fwd<T, true>(h.data<T>(), b.data<T>(), r.slope.defined() ? r.slope.data<T>() : nullptr, v, y16,
                             slope16);
    else
      bias_gelu_fwd<T, false>(h.data<T>(), b.data<T>(), nullptr, v, y16);
  });
  return r;
}

GeluSlopeGrads gelu_backward_with_slope(const Tensor& dy, const Tensor& slope, bool want_column_sums,
                                        bool overwrite_dy) {
  check_same(dy, slope, "gelu_backward_with_slope", "dy", "slope");
  const RowView v = rows_of(dy, "gelu_backward_with_slope");
  if (overwrite_dy && !dy.is_contiguous())
    throw std::invalid_argument("gelu_backward_with_slope: dh can be written over dy only if dy is contiguous");
  const Tensor dyc = dy.contiguous(), sc = slope.contiguous();
  GeluSlopeGrads g{overwrite_dy ? dy : Tensor::empty(dy.shape(), dy.dtype()),
                   want_column_sums ? Tensor::empty({v.cols}, dy.dtype()) : Tensor()};
  dispatch(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gelu_slope_bwd<T>(dyc.data<T>(), sc.data<T>(), g.dh.data<T>(),
                      want_column_sums ? g.column_sums.data<T>() : nullptr, v);
  });
  if (want_column_sums && v.rows == 0) g.column_sums.fill_(0.0);
  return g;
}

GeluSlopeRounded gelu_backward_rounded(const Tensor& dy, const Tensor& slope, bool want_column_sums) {
  check_same(dy, slope, "gelu_backward_rounded", "dy", "slope");
  const RowView v = rows_of(dy, "gelu_backward_rounded");
  if (dy.dtype() != DType::f32)
    throw std::invalid_argument("gelu_backward_rounded: dy is " + to_string(dy.dtype()) +
                                "; only float32 rounds to bf16");
  const Tensor dyc = dy.contiguous(), sc = slope.contiguous();
  bf16_t* dh16 = nullptr;
  GeluSlopeRounded g{spare_bf16_copy(v.rows, v.cols, &dh16),
                     want_column_sums ? Tensor::empty({v.cols}, dy.dtype()) : Tensor()};
  gelu_slope_bwd<float>(dyc.data<float>(), sc.data<float>(), nullptr,
                        want_column_sums ? g.column_sums.data<float>() : nullptr, v, dh16);
  if (want_column_sums && v.rows == 0) g.column_sums.fill_(0.0);
  return g;
}

GeluSlopeRounded gelu_backward_rounded(const Tensor& dy, const Bf16Copy& slope16, bool want_column_sums) {
  const RowView v = rows_of(dy, "gelu_backward_rounded");
  if (dy.dtype() != DType::f32)
    throw std::invalid_argument("gelu_backward_rounded: dy is " + to_string(dy.dtype()) +
                                "; only float32 rounds to bf16");
  if (!slope16 || slope16.rows != v.rows || slope16.cols != v.cols)
    throw std::invalid_argument("gelu_backward_rounded: the rounded slope is not [" + std::to_string(v.rows) + ", " +
                                std::to_string(v.cols) + "] as dy is");
  const Tensor dyc = dy.contiguous();
  bf16_t* dh16 = nullptr;
  GeluSlopeRounded g{spare_bf16_copy(v.rows, v.cols, &dh16),
                     want_column_sums ? Tensor::empty({v.cols}, dy.dtype()) : Tensor()};
  gelu_slope_bwd<float, bf16_t>(dyc.data<float>(), slope16.data(), nullptr,
                                want_column_sums ? g.column_sums.data<float>() : nullptr, v, dh16);
  if (want_column_sums && v.rows == 0) g.column_sums.fill_(0.0);
  return g;
}

Tensor GeluWithSlope::slope_values() const { return slope16 ? widen_bf16(slope16) : slope; }

Tensor widen_bf16(const Bf16Copy& copy) {
  Tensor out = Tensor::empty({copy.rows, copy.cols});
  float* o = out.data<float>();
  const bf16_t* in = copy.data();
  const int64_t n = copy.rows * copy.cols;
#pragma omp parallel for simd schedule(static) if (parallel(n))
  for (int64_t i = 0; i < n; ++i) o[i] = from_bf16(in[i]);
  return out;
}

}  // namespace headlab::core

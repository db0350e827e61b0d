// Internal: float exp and normal CDF that the compiler can vectorize.
//
// libm's expf/erff are scalar calls; in loops over activations they cost
// more than the GEMMs of a small model. These are branch-free (selects
// only), so `#pragma omp simd` loops turn them into AVX code; without
// AVX-512 only under -fno-trapping-math (see core/CMakeLists.txt). Each gives
// the same bits for the same input on every call, on any thread.
// Accuracy: exp within 2 ulp (results below 1.2e-38 flush to 0); the normal
// CDF within 3e-7 absolute. double keeps libm.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace headlab::core::detail {

// e^x: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact
// reduction), e^r by a degree-6 polynomial, 2^n by building the exponent.
inline float fast_exp(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float kLo = -87.33654f, kHi = 88.7228f;
  const float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  // Round to nearest by adding and removing 1.5 * 2^23: the float's low bits
  // then hold n as an integer, without a (non-vectorizing) call.
  const float kShift = 12582912.0f;
  const float shifted = std::fma(xc, kLog2e, kShift);
  const float n = shifted - kShift;
  float r = std::fma(-n, kLn2Hi, xc);
  r = std::fma(-n, kLn2Lo, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r) + 1.0f;  // 1 + r + r^2 P(r)
  // 2^n as 2^h * 2^(n-h), h = n / 2, so that both factors are normal floats
  // for every n in [-126, 128]; n is the low bits of `shifted`.
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  const int32_t h = ni >> 1;
  const float y = p * std::bit_cast<float>((h + 127) << 23) * std::bit_cast<float>((ni - h + 127) << 23);
  return x < kLo ? 0.0f : (x > kHi ? HUGE_VALF : y);
}

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)) and, in `pdf`, the density phi(x).
// erfc(z) = t P(t) exp(-z^2), t = 1 / (1 + p z): Abramowitz & Stegun 7.1.26,
// the formula PyTorch's vectorized CPU erf uses too; its exp(-z^2) is the
// density's as well, so GELU's backward needs one exp. The tail is computed
// directly (Phi(x) = erfc(|x| / sqrt 2) / 2 for x < 0), without the
// cancellation of 1 + erf.
inline float normal_cdf(float x, float& pdf) {
  const float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  const float z = std::fabs(x) * kInvSqrt2;
  const float t = 1.0f / std::fma(0.3275911f, z, 1.0f);
  float poly = 1.061405429f;
  poly = std::fma(poly, t, -1.453152027f);
  poly = std::fma(poly, t, 1.421413741f);
  poly = std::fma(poly, t, -0.284496736f);
  poly = std::fma(poly, t, 0.254829592f);
  const float e = fast_exp(-z * z);  // = exp(-x^2 / 2)
  pdf = kInvSqrt2Pi * e;
  const float q = 0.5f * poly * t * e;  // 0.5 erfc(z)
  return x < 0.0f ? q : 1.0f - q;
}

}  // namespace headlab::core::detail

// The GEMM precision for the tests: the suite runs in f32, or in bf16 mixed
// precision under HEADLAB_PRECISION=bf16 (scripts/test.sh's third Release
// pass, core/gemm.h). A test whose claim holds in bf16 with a looser bound
// states that bound through these helpers, and keeps its f32 bound as it was
// when the products run in f32.
#pragma once

#include <gtest/gtest.h>

#include "core/gemm.h"

namespace headlab::test {

// Whether the float32 products run in bf16 now.
inline bool in_bf16() { return core::gemm_precision() == core::GemmPrecision::bf16; }

// f32_bound when the products run in f32, bf16_bound when they run in bf16.
inline double precision_bound(double f32_bound, double bf16_bound) { return in_bf16() ? bf16_bound : f32_bound; }

// bf16's unit roundoff: a float rounded to bf16 (8 significant bits, to
// nearest) moves by at most this fraction of itself.
inline constexpr double kBf16Roundoff = 0x1p-8;

// What rounding both operands of a float32 product to bf16 can add to an
// element c = sum_p a_p b_p, given sum_p |a_p b_p|: each term moves by at
// most (1 + u)^2 - 1 = 2u + u^2 of itself. 0 when the products run in f32.
inline double bf16_rounding_bound(double abs_products) {
  return in_bf16() ? (2 * kBf16Roundoff + kBf16Roundoff * kBf16Roundoff) * abs_products : 0;
}

// Sets the GEMM precision for a scope, as the CLI's --precision does for a process.
class PrecisionScope {
 public:
  explicit PrecisionScope(core::GemmPrecision p) : previous_(core::gemm_precision()) { core::set_gemm_precision(p); }
  ~PrecisionScope() { core::set_gemm_precision(previous_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  core::GemmPrecision previous_;
};

}  // namespace headlab::test

// The bf16 tests' first line: without bf16 units the CLI refuses bf16, and
// oneDNN would only emulate it.
#define SKIP_WITHOUT_BF16_UNITS() \
  if (!::headlab::core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)"

// A GEMM's bias (core/gemm.h, BatchedGemm::bias): C = op(A) op(B) + bias,
// added by oneDNN's epilogue or, on the other paths, by C's rows starting as
// the bias at beta 1 (the old way of a Linear's forward), on every path a
// product can take: single and batched, small products, the packed bf16
// ones, the blocks of parallel_gemms, float64, and the replay of
// --gemm-alone. The two ways round alike unless the kernel adds its sum into
// C in parts (long k): then they differ in the last bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/blas.h"
#include "core/gemm.h"
#include "core/gemm_replay.h"
#include "tests/core/gemm_test_util.h"
#include "tests/threads_scope.h"

namespace headlab::core {
namespace {

using test::random_floats;

struct Shape3 {
  bool ta, tb;
  int64_t m, n, k, outer, inner;
};

// The precisions this CPU runs (bf16 only with its units, or emulated as the suite's bf16 pass asks).
std::vector<GemmPrecision> precisions() {
  if (cpu_has_native_bf16()) return {GemmPrecision::f32, GemmPrecision::bf16};
  return {GemmPrecision::f32};
}

std::string name(GemmBackend backend, GemmPrecision precision, const Shape3& s) {
  return std::string(gemm_backend_name(backend)) + " " + gemm_precision_name(precision) + " " +
         std::to_string(s.outer) + "x" + std::to_string(s.inner) + "x[" + std::to_string(s.m) + "," +
         std::to_string(s.n) + "," + std::to_string(s.k) + "]" + (s.ta ? " ta" : "") + (s.tb ? " tb" : "");
}

// How a product gets the bias: not at all, as BatchedGemm's, or as C's rows at beta 1.
enum class Bias { none, given, as_rows };

// C for `s`, dense, products one after another.
std::vector<float> product(const Shape3& s, const std::vector<float>& a, const std::vector<float>& b,
                           const std::vector<float>& bias, Bias how) {
  std::vector<float> c(static_cast<std::size_t>(s.outer * s.inner * s.m * s.n), -7.0f);  // no bias reads C: never seen
  detail::BatchedGemm<float> g{.ta = s.ta, .tb = s.tb, .m = s.m, .n = s.n, .k = s.k, .outer = s.outer,
                               .inner = s.inner};
  g.a = a.data(), g.lda = s.ta ? s.m : s.k, g.a_stride[0] = s.inner * s.m * s.k, g.a_stride[1] = s.m * s.k;
  g.b = b.data(), g.ldb = s.tb ? s.k : s.n, g.b_stride[0] = s.inner * s.k * s.n, g.b_stride[1] = s.k * s.n;
  g.c = c.data(), g.ldc = s.n, g.c_stride[0] = s.inner * s.m * s.n, g.c_stride[1] = s.m * s.n;
  if (how == Bias::as_rows) {
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = bias[i % static_cast<std::size_t>(s.n)];
    g.beta = 1.0f;
  }
  if (how == Bias::given) g.bias = bias.data();
  if (s.outer == 1 && s.inner == 1)
    detail::gemm<float>(s.ta, s.tb, s.m, s.n, s.k, g.a, g.lda, g.b, g.ldb, g.c, g.ldc, g.alpha, g.beta, g.bias);
  else
    detail::batched_gemm(g);
  return c;
}

// got and want (C's entries) alike within the rounding of a sum of k terms of sizes up to `term`.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t k, double term,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * (1.0 + static_cast<double>(k) * term)) << what << " entry " << i;
}

double largest(const std::vector<float>& v) {
  double m = 0;
  for (const float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

TEST(GemmBias, AddsTheBiasToEveryRowOnEveryPath) {
  const Shape3 shapes[] = {
      {false, true, 48, 40, 64, 1, 1},  // a Linear's forward: x W^T
      {false, false, 33, 17, 29, 1, 1},  {true, true, 20, 50, 24, 1, 1},
      {false, true, 16, 24, 32, 2, 3},   // batched
      {false, false, 4, 8, 8, 2, 2},     // small products: headlab's loops
      {false, true, 6, 5, 0, 1, 1},      // k = 0: C is the bias
  };
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas})
    for (const GemmPrecision precision : precisions())
      for (const Shape3& s : shapes) {
        const test::Scope scope(backend, precision);
        const std::vector<float> a = random_floats(std::max<int64_t>(1, s.outer * s.inner * s.m * s.k), 1);
        const std::vector<float> b = random_floats(std::max<int64_t>(1, s.outer * s.inner * s.k * s.n), 2);
        const std::vector<float> bias = random_floats(s.n, 3);
        // Without a bias first: a kernel cached for the same shape must not
        // serve the product with one (nor the other way round).
        const std::vector<float> plain = product(s, a, b, bias, Bias::none);
        const std::vector<float> with_bias = product(s, a, b, bias, Bias::given);
        expect_close(with_bias, product(s, a, b, bias, Bias::as_rows), s.k, largest(a) * largest(b),
                     name(backend, precision, s));
        // The bias, added: with_bias - plain is it, row after row.
        for (std::size_t i = 0; i < plain.size(); ++i)
          ASSERT_NEAR(with_bias[i] - plain[i], bias[i % bias.size()], 1e-5 * (1.0 + std::abs(plain[i])))
              << name(backend, precision, s) << " entry " << i;
        EXPECT_EQ(plain, product(s, a, b, bias, Bias::none)) << name(backend, precision, s);
        if (s.k == 0) {
          for (std::size_t i = 0; i < with_bias.size(); ++i)
            ASSERT_EQ(with_bias[i], bias[i % bias.size()]) << name(backend, precision, s);
        }
      }
}

TEST(GemmBias, Float64AddsItAsWell) {
  const std::vector<double> a{1, 2, 3, 4, 5, 6}, b{1, 0, 0, 1, 1, 1}, bias{0.5, -2};
  std::vector<double> c(6, 99.0);
  detail::gemm<double>(false, false, 3, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2, 1.0, 0.0, bias.data());
  EXPECT_EQ(c, (std::vector<double>{1.5, 0, 3.5, 2, 5.5, 4}));  // rows of a times [[1, 0], [0, 1]] plus the bias
}

TEST(GemmBias, NeedsAlphaOneAndBetaZero) {
  const std::vector<float> a(16, 1.0f), bias(4, 1.0f);
  std::vector<float> c(16);
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const test::Scope scope(backend, GemmPrecision::f32);
    EXPECT_THROW(detail::gemm<float>(false, false, 4, 4, 4, a.data(), 4, a.data(), 4, c.data(), 4, 2.0f, 0.0f,
                                     bias.data()),
                 std::logic_error);
    EXPECT_THROW(detail::gemm<float>(false, false, 4, 4, 4, a.data(), 4, a.data(), 4, c.data(), 4, 1.0f, 1.0f,
                                     bias.data()),
                 std::logic_error);
  }
}

// parallel_gemms splits a product into blocks of C's rows, or of its
// columns when C is wider than tall: each block adds its own part of the bias.
// On 2 threads: on one, a product runs whole.
TEST(GemmBias, EachBlockOfAParallelProductAddsItsColumnsOfTheBias) {
  const headlab::test::ThreadsScope two(2);
  struct Case {
    int64_t m, n, k;
  };
  for (const Case cs : {Case{512, 64, 128}, Case{64, 512, 128}})
    for (const GemmPrecision precision : precisions()) {
      const test::Scope scope(GemmBackend::onednn, precision);
      const detail::GemmCall<float> probe{.ta = false, .tb = true, .m = cs.m, .n = cs.n, .k = cs.k};
      ASSERT_GT(probe.blocks(), 1) << "the case must be split to test the blocks";
      const std::vector<float> x = random_floats(cs.m * cs.k, 4), w = random_floats(cs.n * cs.k, 5);
      const std::vector<float> bias = random_floats(cs.n, 6);
      std::vector<float> got(static_cast<std::size_t>(cs.m * cs.n)), want(got.size());
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = bias[i % static_cast<std::size_t>(cs.n)];
      detail::parallel_gemms<float>({{.ta = false, .tb = true, .m = cs.m, .n = cs.n, .k = cs.k, .a = x.data(),
                                      .lda = cs.k, .b = w.data(), .ldb = cs.k, .c = want.data(), .ldc = cs.n,
                                      .beta = 1.0f}});
      detail::parallel_gemms<float>({{.ta = false, .tb = true, .m = cs.m, .n = cs.n, .k = cs.k, .a = x.data(),
                                      .lda = cs.k, .b = w.data(), .ldb = cs.k, .c = got.data(), .ldc = cs.n,
                                      .bias = bias.data()}});
      expect_close(got, want, cs.k, largest(x) * largest(w),
                   std::to_string(cs.m) + "x" + std::to_string(cs.n) + " " + gemm_precision_name(precision));
    }
}

TEST(GemmBias, TheReplayOfAStepRunsProductsWithABias) {
  for (const GemmPrecision precision : precisions()) {
    const test::Scope scope(GemmBackend::onednn, precision);
    const std::vector<float> x = random_floats(64 * 32, 7), w = random_floats(48 * 32, 8), bias = random_floats(48, 9);
    std::vector<float> want(64 * 48), got(want.size());
    const auto work = [&](std::vector<float>& c) {
      detail::parallel_gemms<float>({{.ta = false, .tb = true, .m = 64, .n = 48, .k = 32, .a = x.data(), .lda = 32,
                                      .b = w.data(), .ldb = 32, .c = c.data(), .ldc = 48, .bias = bias.data()}});
    };
    work(want);
    const GemmTimes t = gemm_time_inside_and_alone([&] { work(got); }, 1);
    EXPECT_GE(t.calls, 1);
    EXPECT_GT(t.alone_ms, 0.0);
    EXPECT_EQ(got, want) << gemm_precision_name(precision);
  }
}

}  // namespace
}  // namespace headlab::core

// bf16 mixed precision in the GEMM layer (core/gemm.h, core/gemm_bf16.cpp):
// rounding to bf16, both backends' bf16 products against a double-precision
// reference (every transpose, wide leading dimensions, alpha and beta,
// attention's strided batches), the f32 guard, precision names.
//
// The reference is the double product of the operands rounded to bf16: a
// bf16 product must match it to float32 accumulation's error, which a
// product in f32 (operands not rounded) would miss by far (the test checks
// that too), and must lie within bf16's error of the unrounded product.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/bf16_operands.h"
#include "core/cpu_features.h"
#include "core/blas.h"
#include "core/gemm.h"
#include "core/gemm_kernels.h"
#include "core/gemm_peak.h"
#include "core/gemm_replay.h"
#include "core/ops.h"
#include "core/random.h"
#include "tests/core/gemm_test_util.h"
#include "tests/precision.h"
#include "tests/threads_scope.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

using test::Scope;
using test::random_floats;

double rounded(float x) { return from_bf16(to_bf16(x)); }

TEST(Bf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(-2.0f), 0xC000);
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7: down to the even one.
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one.
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // past the half: up
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up into infinity, as it should
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(from_bf16(to_bf16(3.140625f)), 3.140625f);  // exactly representable: unchanged
  EXPECT_EQ(to_bf16(-1e-40f), 0x8000);  // a denormal: a zero of its sign, as vcvtneps2bf16 gives
}

// pack_bf16 runs vcvtne2ps2bf16 where the CPU has it: the same bits as
// to_bf16 on every kind of float (ties, NaN, infinities, denormals), at
// every row length (the masked tail).
TEST(Bf16, PackingGivesToBf16sBitsOnEveryKindOfFloat) {
  std::vector<float> values = random_floats(200, 4);
  for (const float special : {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1e-40f, -1e-39f, 0x1p-126f,
                              std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()})
    values.push_back(special);
  for (const int64_t cols : {1, 15, 16, 17, 31, 32, 33, 211}) {
    const int64_t rows = static_cast<int64_t>(values.size()) / cols;
    std::vector<bf16_t> packed(static_cast<std::size_t>(rows * cols));
    pack_bf16(values.data(), rows, cols, cols, packed.data());
    for (int64_t i = 0; i < rows * cols; ++i)
      ASSERT_EQ(packed[i], to_bf16(values[i])) << "cols " << cols << " value " << values[i];
  }
}

TEST(Bf16, PacksARowMajorBlockDensely) {
  const std::vector<float> src = {1, 2, 99, 3, 4, 99};  // [2, 2] with leading dimension 3
  std::vector<bf16_t> dst(4);
  pack_bf16(src.data(), 2, 2, 3, dst.data());
  EXPECT_EQ(dst, (std::vector<bf16_t>{to_bf16(1), to_bf16(2), to_bf16(3), to_bf16(4)}));
}

TEST(Bf16, PrecisionsByNameAndTheF32Guard) {
  EXPECT_EQ(parse_gemm_precision("f32"), GemmPrecision::f32);
  EXPECT_EQ(parse_gemm_precision("bf16"), GemmPrecision::bf16);
  EXPECT_STREQ(gemm_precision_name(GemmPrecision::bf16), "bf16");
  EXPECT_THROW(parse_gemm_precision("fp16"), std::invalid_argument);
  const Scope scope(gemm_backend(), GemmPrecision::bf16);
  EXPECT_EQ(gemm_precision(), GemmPrecision::bf16);
  {
    const F32Gemms outer;
    {
      const F32Gemms inner;  // nested (or on another thread): still f32 until the last one ends
      EXPECT_EQ(gemm_precision(), GemmPrecision::f32);
    }
    EXPECT_EQ(gemm_precision(), GemmPrecision::f32);
  }
  EXPECT_EQ(gemm_precision(), GemmPrecision::bf16);
}

// HEADLAB_PRECISION is the default precision, read at the first use as
// HEADLAB_GEMM is for the backend; a bad value, or bf16 on a CPU without
// bf16 units (as the CLI refuses --precision bf16), is an error naming it.
// Read once per process: each case runs in a process of its own, started
// afresh (the threadsafe death-test style re-executes the binary).
TEST(Bf16DeathTest, HeadlabPrecisionIsTheDefaultAndIsChecked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* saved = std::getenv("HEADLAB_PRECISION");
  const std::string previous = saved ? saved : "";
  // Unset first: a child re-runs the test from its start, with the
  // environment its parent had when it started it.
  ::unsetenv("HEADLAB_NO_CPU_BF16");
  const bool units = cpu_has_native_bf16();
  // Exits 10 for bf16, 11 for f32, 12 after printing the error.
  const auto first_use = [] {
    try {
      std::_Exit(gemm_precision() == GemmPrecision::bf16 ? 10 : 11);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(12);
    }
  };
  ::setenv("HEADLAB_PRECISION", "f32", 1);
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(11), "");
  ::setenv("HEADLAB_PRECISION", "fp8", 1);
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(12), "HEADLAB_PRECISION must be f32 or bf16, got 'fp8'");
  ::setenv("HEADLAB_PRECISION", "bf16", 1);
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(units ? 10 : 12), "");
  ::setenv("HEADLAB_NO_CPU_BF16", "1", 1);
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(12), "HEADLAB_PRECISION=bf16: this CPU has no bf16 units");
  // HEADLAB_EMULATE_BF16=1 lets any CPU run bf16 (emulated), and gives way to the refusal's variable.
  const char* emulate = std::getenv("HEADLAB_EMULATE_BF16");
  const std::string emulate_was = emulate ? emulate : "";
  ::setenv("HEADLAB_EMULATE_BF16", "1", 1);
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(12), "HEADLAB_PRECISION=bf16: this CPU has no bf16 units");
  ::unsetenv("HEADLAB_NO_CPU_BF16");
  EXPECT_EXIT(first_use(), testing::ExitedWithCode(10), "");
  if (emulate)
    ::setenv("HEADLAB_EMULATE_BF16", emulate_was.c_str(), 1);
  else
    ::unsetenv("HEADLAB_EMULATE_BF16");
  if (saved)
    ::setenv("HEADLAB_PRECISION", previous.c_str(), 1);
  else
    ::unsetenv("HEADLAB_PRECISION");
}

class Bf16Gemm : public ::testing::TestWithParam<std::tuple<GemmBackend, bool, bool, float, float>> {};

TEST_P(Bf16Gemm, MatchesTheDoubleProductOfRoundedOperands) {
  SKIP_WITHOUT_BF16_UNITS();
  const auto [backend, ta, tb, alpha, beta] = GetParam();
  const int64_t m = 37, n = 21, k = 150;
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
  const std::vector<float> a = random_floats((ta ? k : m) * lda, 1), b = random_floats((tb ? n : k) * ldb, 2);
  const std::vector<float> c0 = random_floats(m * ldc, 3);
  std::vector<float> c = c0, c32 = c0;
  {
    const Scope scope(backend, GemmPrecision::bf16);
    detail::gemm<float>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, alpha, beta);
  }
  {
    const Scope scope(backend, GemmPrecision::f32);
    detail::gemm<float>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c32.data(), ldc, alpha, beta);
  }
  int f32_misses = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) {
        EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]);  // padding past n is never written
        continue;
      }
      double s = 0, exact = 0, size = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += rounded(x) * rounded(y);
        exact += static_cast<double>(x) * y;
        size += std::abs(static_cast<double>(x) * y);
      }
      const double keep = beta * static_cast<double>(c0[i * ldc + j]);
      const double want = alpha * s + keep, tolerance = 1e-5 * (alpha * size + std::abs(keep) + 1);
      EXPECT_NEAR(c[i * ldc + j], want, tolerance) << i << "," << j;
      // Each operand is within 2^-9 relative of its float: the product within 2^-8 of the sum of |x y|.
      EXPECT_NEAR(c[i * ldc + j], alpha * exact + keep, alpha * 0x1p-8 * size + tolerance) << i << "," << j;
      if (std::abs(c32[i * ldc + j] - want) > tolerance) ++f32_misses;
    }
  EXPECT_GT(f32_misses, m * n / 2) << "the f32 product matches the rounded reference: the test cannot tell them apart";
}

INSTANTIATE_TEST_SUITE_P(AllCases, Bf16Gemm,
                         ::testing::Combine(::testing::Values(GemmBackend::onednn, GemmBackend::openblas),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Values(1.0f, 0.25f),
                                            ::testing::Values(0.0f, 1.0f)));

// Attention's layout, batched over [B, H] with strides into [B, T, d]: the
// rounded reference per head, on both backends; same bits on a repeat.
TEST(Bf16Gemm, BatchedStridedHeadsMatchTheRoundedReference) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t B = 3, H = 4, T = 9, dk = 16, d = H * dk;
  const std::vector<float> q = random_floats(B * T * d, 6), k = random_floats(B * T * d, 7);
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const Scope scope(backend, GemmPrecision::bf16);
    std::vector<float> s(static_cast<std::size_t>(B * H * T * T));
    detail::BatchedGemm<float> qk = test::qk_heads(q.data(), k.data(), s.data(), B, H, T, dk);
    detail::batched_gemm(qk);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) {
            double want = 0;
            for (int64_t p = 0; p < dk; ++p)
              want += rounded(q[(b * T + i) * d + h * dk + p]) * rounded(k[(b * T + j) * d + h * dk + p]);
            EXPECT_NEAR(s[((b * H + h) * T + i) * T + j], want, 1e-5 * (1 + std::abs(want)))
                << gemm_backend_name(backend) << " " << b << "," << h << "," << i << "," << j;
          }
    std::vector<float> again(s.size());
    qk.c = again.data();
    detail::batched_gemm(qk);
    EXPECT_EQ(s, again) << gemm_backend_name(backend);
  }
}

// A causal chunk's products write a strided C: S = Q K^T into rows 64..127
// and keys 0..127 of [B, H, T, T] scores of T = 192, and P V added (beta
// 0.5) into a head's columns of [B, T, d]. oneDNN computes them in a dense
// buffer (gemm_onednn.cpp) on brgemm, where the CPU has AVX-512: the rounded
// reference, C outside the chunk untouched, the same bits on a repeat.
TEST(Bf16Gemm, StridedChunksOfAttentionMatchTheReferenceOnBrgemm) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t B = 2, H = 4, T = 192, dk = 32, d = H * dk, r0 = 64, rows = 64, keys = 128;
  const std::vector<float> q = random_floats(B * T * d, 8), k = random_floats(B * T * d, 9);
  const std::vector<float> p = random_floats(B * H * T * T, 10), c0 = random_floats(B * T * d, 11);
  const float beta = 0.5f;
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const Scope scope(backend, GemmPrecision::bf16);
    std::vector<float> s(static_cast<std::size_t>(B * H * T * T), -7.0f), o = c0;
    detail::BatchedGemm<float> qk = test::qk_heads(q.data() + r0 * d, k.data(), s.data() + r0 * T, B, H, T, dk);
    qk.m = rows, qk.n = keys;
    const detail::BatchedGemm<float> pv{.m = rows, .n = dk, .k = keys, .outer = B, .inner = H,
                                        .a = p.data() + r0 * T, .lda = T, .a_stride = {H * T * T, T * T},
                                        .b = q.data(), .ldb = d, .b_stride = {T * d, dk},
                                        .c = o.data() + r0 * d, .ldc = d, .c_stride = {T * d, dk}, .beta = beta};
    const std::vector<GemmKernelUse> uses = gemm_kernels_of([&] {
      detail::batched_gemm(qk);
      detail::batched_gemm(pv);
    });
    if (backend == GemmBackend::onednn && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      ASSERT_EQ(uses.size(), 2u);
      for (const GemmKernelUse& u : uses) EXPECT_EQ(u.kernel.rfind("brg:", 0), 0u) << u.kernel << " " << u.shapes;
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const bool in_chunk = i >= r0 && i < r0 + rows;
          for (int64_t j = 0; j < T; ++j) {
            const float got = s[static_cast<std::size_t>(((b * H + h) * T + i) * T + j)];
            if (!in_chunk || j >= keys) {
              ASSERT_EQ(got, -7.0f) << "score outside the chunk changed: " << b << "," << h << "," << i << "," << j;
              continue;
            }
            double want = 0, size = 0;
            for (int64_t x = 0; x < dk; ++x) {
              const double t = rounded(q[(b * T + i) * d + h * dk + x]) * rounded(k[(b * T + j) * d + h * dk + x]);
              want += t, size += std::abs(t);
            }
            ASSERT_NEAR(got, want, 1e-5 * (1 + size)) << gemm_backend_name(backend) << " S " << i << "," << j;
          }
          for (int64_t j = 0; j < dk; ++j) {
            const std::size_t at = static_cast<std::size_t>((b * T + i) * d + h * dk + j);
            if (!in_chunk) {
              ASSERT_EQ(o[at], c0[at]) << "output outside the chunk changed: " << b << "," << h << "," << i;
              continue;
            }
            double want = beta * c0[at], size = std::abs(want);
            for (int64_t x = 0; x < keys; ++x) {
              const double t = rounded(p[static_cast<std::size_t>(((b * H + h) * T + i) * T + x)]) *
                               rounded(q[(b * T + x) * d + h * dk + j]);
              want += t, size += std::abs(t);
            }
            ASSERT_NEAR(o[at], want, 1e-5 * (1 + size)) << gemm_backend_name(backend) << " PV " << i << "," << j;
          }
        }
    std::vector<float> again(s.size(), -7.0f);
    qk.c = again.data() + r0 * T;
    detail::batched_gemm(qk);
    EXPECT_EQ(s, again) << gemm_backend_name(backend);
  }
}

// A product large enough to split into blocks over the threads
// (core/blas.h: its operands packed once, shared by the blocks), on both
// backends, at 2 threads in blocks and at 1 thread whole: each the rounded
// reference, and the same bits run to run.
TEST(Bf16Gemm, BlockedMatmulMatchesTheRoundedReference) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t m = 300, k = 200, n = 100;
  const std::vector<float> a = random_floats(m * k, 10), b = random_floats(k * n, 11);
  const auto tensor = [](const std::vector<float>& v, int64_t rows, int64_t cols) {
    return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {rows, cols}, DType::f32);
  };
  const Tensor ta = tensor(a, m, k), tb = tensor(b, k, n);
  const int threads = num_threads();
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const Scope scope(backend, GemmPrecision::bf16);
    for (const int t : {1, 2}) {
      set_num_threads(t);
      const std::vector<double> got = matmul(ta, tb).to_vector();
      EXPECT_EQ(matmul(ta, tb).to_vector(), got) << gemm_backend_name(backend) << " " << t << " thread(s)";
      set_num_threads(threads);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, size = 0;
          for (int64_t p = 0; p < k; ++p) {
            want += rounded(a[i * k + p]) * rounded(b[p * n + j]);
            size += std::abs(static_cast<double>(a[i * k + p]) * b[p * n + j]);
          }
          ASSERT_NEAR(got[i * n + j], want, 1e-5 * (size + 1))
              << gemm_backend_name(backend) << " " << t << " thread(s) " << i << "," << j;
        }
    }
  }
}

// A Linear's backward: dx = g W and dW = g^T x in one parallel region, the
// gradient g packed once for both (the same stored matrix); each against
// the rounded reference, on both backends.
TEST(Bf16Gemm, LinearBackwardSharesTheGradientsPackingAndMatchesTheReference) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t rows = 96, in = 40, out = 24;
  const std::vector<float> g = random_floats(rows * out, 12), x = random_floats(rows * in, 13),
                           w = random_floats(out * in, 14);
  const auto tensor = [](const std::vector<float>& v, int64_t r, int64_t c) {
    return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {r, c}, DType::f32);
  };
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const Scope scope(backend, GemmPrecision::bf16);
    const LinearGrads grads = linear_backward(tensor(g, rows, out), tensor(x, rows, in), tensor(w, out, in), true, true);
    const std::vector<double> dx = grads.dx.to_vector(), dw = grads.dweight.to_vector();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < in; ++j) {
        double want = 0;
        for (int64_t p = 0; p < out; ++p) want += rounded(g[i * out + p]) * rounded(w[p * in + j]);
        ASSERT_NEAR(dx[i * in + j], want, 1e-5 * (std::abs(want) + 1)) << gemm_backend_name(backend) << " dx";
      }
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) {
        double want = 0;
        for (int64_t p = 0; p < rows; ++p) want += rounded(g[p * out + i]) * rounded(x[p * in + j]);
        ASSERT_NEAR(dw[i * in + j], want, 1e-5 * (std::abs(want) + 10)) << gemm_backend_name(backend) << " dW";
      }
  }
}

// Products split into row or column blocks (core/blas.h) with transposed
// operands: each block reads a strided part of an operand, which oneDNN's
// path first copies dense (and, with beta 0, computes its C block in a
// dense buffer too). Both backends (OpenBLAS's bf16 fallback widens a
// block's whole extent), both precisions, beta 0 and 1, against the
// reference (of the rounded operands in bf16). On 2 threads: on one, a
// product runs whole.
TEST(Bf16Gemm, BlocksOfTransposedOperandsMatchTheReferenceInEitherPrecision) {
  const headlab::test::ThreadsScope two(2);
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{300, 64}, {64, 300}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const int64_t k = 120;
        const std::vector<float> a = random_floats(m * k, 15), b = random_floats(k * n, 16),
                                 c0 = random_floats(m * n, 17);
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        for (const GemmPrecision precision : {GemmPrecision::f32, GemmPrecision::bf16}) {
          if (precision == GemmPrecision::bf16 && !cpu_has_native_bf16()) continue;
          std::vector<double> product(static_cast<std::size_t>(m * n)), size(product.size());
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              for (int64_t p = 0; p < k; ++p) {
                const float x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
                product[i * n + j] += precision == GemmPrecision::bf16 ? rounded(x) * rounded(y) : double{x} * y;
                size[i * n + j] += std::abs(static_cast<double>(x) * y);
              }
          for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas})
            for (const float beta : {0.0f, 1.0f}) {
              const Scope scope(backend, precision);
              std::vector<float> c = c0;
              const detail::GemmCall<float> call{ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), n, 1.0f, beta};
              ASSERT_GT(call.blocks(), 1);
              detail::parallel_gemms<float>({call});
              for (int64_t i = 0; i < m * n; ++i)
                ASSERT_NEAR(c[i], beta * c0[i] + product[i], 1e-5 * (size[i] + 1))
                    << gemm_precision_name(precision) << " " << gemm_backend_name(backend) << " m " << m << " ta "
                    << ta << " tb " << tb << " beta " << beta << " element " << i;
            }
        }
      }
}

// dW = g^T x in bf16 on oneDNN, split into blocks by rows of g^T (out >=
// in: g's column blocks, each rounded by its block) or by columns of x
// (out < in): odd shapes, 2 and 4 blocks, a trailing block short or empty.
// At 2 threads, against the double product of the rounded operands (a
// block that read a wrong column range of g or x would miss it by far), and
// bit for bit against the blocks computed as they were when g was rounded
// whole: each block's strided operand copied dense, a column block's C
// computed dense and copied out. At 1 thread the product runs whole, g
// rounded whole: the reference again, and the bits of the whole product of
// the rounded operands.
TEST(Bf16Gemm, WeightGradientBlocksMatchTheReferenceAndTheCopiedBlocksBits) {
  SKIP_WITHOUT_BF16_UNITS();
  struct Case {
    int64_t out, in, rows, blocks;
  };
  // 140 rows of g^T in 4 blocks: edges at 48, 96, 140; the fourth is empty.
  const Case cases[] = {{200, 72, 600, 4}, {140, 40, 1000, 4}, {100, 48, 500, 2}, {96, 96, 700, 4},
                        {72, 200, 600, 4}, {40, 140, 1000, 4}, {48, 100, 500, 2}};
  const Scope scope(GemmBackend::onednn, GemmPrecision::bf16);
  const int threads = num_threads();
  for (const Case& t : cases) {
    const std::string name = "dW [" + std::to_string(t.out) + ", " + std::to_string(t.in) + "], " +
                             std::to_string(t.rows) + " rows";
    const std::vector<float> g = random_floats(t.rows * t.out, 50), x = random_floats(t.rows * t.in, 51),
                             w = random_floats(t.out * t.in, 52);
    const detail::GemmCall<float> dw{true, false, t.out, t.in, t.rows, g.data(), t.out, x.data(), t.in};
    const detail::GemmCall<float> dx{false, false, t.rows, t.in, t.out, g.data(), t.out, w.data(), t.in};
    for (const int n : {1, 2}) {
      const headlab::test::ThreadsScope threads_now(n);
      ASSERT_EQ(dw.blocks(), n == 1 ? 1 : t.blocks) << name << ", " << n << " thread(s)";
      const detail::PackedOperands packed = detail::pack_operands({dx, dw});
      // g is rounded by the blocks that read it where both products split it
      // (dx by its rows, dW by its columns); else whole, once for both.
      EXPECT_EQ(packed.calls[1].a_source != nullptr, n == 2 && t.out >= t.in) << name << ", " << n << " thread(s)";
      EXPECT_EQ(packed.calls[0].a_source != nullptr, n == 2 && t.out >= t.in) << name << ", " << n << " thread(s)";
    }

    const auto tensor = [](const std::vector<float>& v, int64_t r, int64_t c) {
      return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {r, c}, DType::f32);
    };
    std::vector<std::vector<double>> got;
    for (const int n : {1, 2}) {
      set_num_threads(n);
      got.push_back(linear_backward(tensor(g, t.rows, t.out), tensor(x, t.rows, t.in), tensor(w, t.out, t.in),
                                    true, true)
                        .dweight.to_vector());
    }
    set_num_threads(threads);

    std::vector<bf16_t> g16(g.size()), x16(x.size());
    pack_bf16(g.data(), t.rows, t.out, t.out, g16.data());
    pack_bf16(x.data(), t.rows, t.in, t.in, x16.data());
    for (int64_t i = 0; i < t.out; ++i)
      for (int64_t j = 0; j < t.in; ++j) {
        double want = 0, size = 0;
        for (int64_t p = 0; p < t.rows; ++p) {
          const double term = double{from_bf16(g16[p * t.out + i])} * from_bf16(x16[p * t.in + j]);
          want += term;
          size += std::abs(term);
        }
        for (const std::vector<double>& each : got)
          ASSERT_NEAR(each[i * t.in + j], want, 1e-5 * (size + 1)) << name << " element " << i << "," << j;
      }

    // 1 thread: the whole product of the rounded operands.
    std::vector<float> whole(static_cast<std::size_t>(t.out * t.in));
    detail::packed_bf16_gemm({.ta = true, .m = t.out, .n = t.in, .k = t.rows, .a = g16.data(), .lda = t.out,
                              .b = x16.data(), .ldb = t.in, .ldc = t.in},
                             1.0f, 0.0f, whole.data());
    EXPECT_EQ(got[0], std::vector<double>(whole.begin(), whole.end())) << name << ": not the whole product's bits";

    // The blocks as copied before: the same dense operands, the same products.
    std::vector<float> copied(static_cast<std::size_t>(t.out * t.in));
    const bool by_rows = t.out >= t.in;
    for (int64_t blk = 0; blk < t.blocks; ++blk) {
      const auto [start, end] = detail::block_range(by_rows ? t.out : t.in, blk, t.blocks);
      const int64_t width = end - start;
      if (width <= 0) continue;
      const std::vector<bf16_t>& from = by_rows ? g16 : x16;
      const int64_t ld = by_rows ? t.out : t.in;
      std::vector<bf16_t> block(static_cast<std::size_t>(t.rows * width));
      for (int64_t r = 0; r < t.rows; ++r)
        std::copy_n(from.data() + r * ld + start, width, block.data() + r * width);
      if (by_rows) {
        detail::packed_bf16_gemm({.ta = true, .m = width, .n = t.in, .k = t.rows, .a = block.data(), .lda = width,
                                  .b = x16.data(), .ldb = t.in, .ldc = t.in},
                                 1.0f, 0.0f, copied.data() + start * t.in);
      } else {
        std::vector<float> c(static_cast<std::size_t>(t.out * width));
        detail::packed_bf16_gemm({.ta = true, .m = t.out, .n = width, .k = t.rows, .a = g16.data(), .lda = t.out,
                                  .b = block.data(), .ldb = width, .ldc = width},
                                 1.0f, 0.0f, c.data());
        for (int64_t r = 0; r < t.out; ++r) std::copy_n(c.data() + r * width, width, copied.data() + r * t.in + start);
      }
    }
    EXPECT_EQ(got[1], std::vector<double>(copied.begin(), copied.end())) << name << ": not the copied blocks' bits";
  }
}

// A Linear's backward from g's rounded copy alone (g made rounded by its
// kernel, core::gelu_backward_rounded) gives the bits of the backward from
// g's float32 values: the same rounded operands in the same layout, on both
// backends, out >= in (g's column blocks copied dense instead of rounded by
// the blocks) and out < in, x as a tensor and as its rounded copy, 1 and 2
// threads. It needs bf16 products and shapes that fit.
TEST(Bf16Gemm, ALinearBackwardFromTheRoundedGradientGivesTheFloatGradientsBits) {
  SKIP_WITHOUT_BF16_UNITS();
  const auto tensor = [](const std::vector<float>& v, int64_t r, int64_t c) {
    return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {r, c}, DType::f32);
  };
  const auto rounded_copy = [](const std::vector<float>& v, int64_t r, int64_t c) {
    auto values = std::make_shared<std::vector<bf16_t>>(v.size());
    pack_bf16(v.data(), r, c, c, values->data());
    return Bf16Copy{values, r, c};
  };
  const int threads = num_threads();
  using Sizes = std::tuple<int64_t, int64_t, int64_t>;  // out, in, rows
  for (const auto& [out, in, rows] : {Sizes{200, 72, 600}, Sizes{40, 140, 1000}, Sizes{24, 40, 96}})
    for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
      const std::string name = "out " + std::to_string(out) + " in " + std::to_string(in) + " " +
                               gemm_backend_name(backend);
      const Scope scope(backend, GemmPrecision::bf16);
      const std::vector<float> g = random_floats(rows * out, 60), x = random_floats(rows * in, 61),
                               w = random_floats(out * in, 62);
      const Bf16Copy g16 = rounded_copy(g, rows, out), x16 = rounded_copy(x, rows, in);
      for (const int n : {1, 2}) {
        set_num_threads(n);
        const LinearGrads want =
            linear_backward(tensor(g, rows, out), tensor(x, rows, in), tensor(w, out, in), true, true);
        const LinearGrads from_x =
            linear_backward(g16, tensor(x, rows, in), Bf16Copy{}, tensor(w, out, in), true, true);
        const LinearGrads from_x16 = linear_backward(g16, Tensor(), x16, tensor(w, out, in), true, true);
        EXPECT_EQ(from_x.dx.to_vector(), want.dx.to_vector()) << name << " threads " << n;
        EXPECT_EQ(from_x.dweight.to_vector(), want.dweight.to_vector()) << name << " threads " << n;
        EXPECT_EQ(from_x16.dx.to_vector(), want.dx.to_vector()) << name << " threads " << n;
        EXPECT_EQ(from_x16.dweight.to_vector(), want.dweight.to_vector()) << name << " threads " << n;
        EXPECT_FALSE(from_x.dbias.defined());
      }
      set_num_threads(threads);
      EXPECT_THROW(linear_backward(g16, tensor(x, rows + 1, in), Bf16Copy{}, tensor(w, out, in), true, true),
                   std::invalid_argument);
    }
  const Scope f32(GemmBackend::onednn, GemmPrecision::f32);
  const std::vector<float> g = random_floats(8 * 4, 63);
  try {
    linear_backward(rounded_copy(g, 8, 4), Tensor::zeros({8, 3}, DType::f32), Bf16Copy{},
                    Tensor::zeros({4, 3}, DType::f32), true, true);
    ADD_FAILURE() << "a rounded grad with f32 products was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--precision bf16"), std::string::npos) << e.what();
  }
}

// A weight gradient's blocks run on oneDNN's brgemm kernels, f32 and bf16,
// where the CPU has AVX-512: its strided blocks (rows of g^T, columns of x)
// are copied dense first. Shapes of the medium preset's QKV, fc1 and fc2.
TEST(GemmKernels, WeightGradientBlocksRunOnBrgemmWithAvx512) {
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
    GTEST_SKIP() << "oneDNN's brgemm matmul needs AVX-512 (avx512_core)";
  const int64_t rows = 2048;
  for (const GemmPrecision precision : {GemmPrecision::f32, GemmPrecision::bf16}) {
    if (precision == GemmPrecision::bf16 && !cpu_has_native_bf16()) continue;
    const Scope scope(GemmBackend::onednn, precision);
    for (const auto& [out, in] : {std::pair<int64_t, int64_t>{256, 256}, {1024, 256}, {256, 1024}}) {
      const auto tensor = [](int64_t r, int64_t c, uint64_t seed) {
        const std::vector<float> v = random_floats(r * c, seed);
        return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {r, c}, DType::f32);
      };
      const Tensor g = tensor(rows, out, 30), x = tensor(rows, in, 31), w = tensor(out, in, 32);
      const std::vector<GemmKernelUse> uses = gemm_kernels_of([&] { linear_backward(g, x, w, false, true); });
      ASSERT_FALSE(uses.empty());
      for (const GemmKernelUse& u : uses)
        EXPECT_EQ(u.kernel.rfind("brg:", 0), 0u)
            << gemm_precision_name(precision) << " dW [" << out << ", " << in << "]: " << u.kernel << " " << u.shapes;
    }
  }
}

// Under bf16 a blocked product's blocks are the packed bf16 products the
// replay counts (core/gemm_replay.h), each once, with the result unchanged.
// On 2 threads: on one, a product runs whole.
TEST(GemmReplay, CountsTheBlocksOfAPackedBf16Product) {
  SKIP_WITHOUT_BF16_UNITS();
  const headlab::test::ThreadsScope two(2);
  const Scope scope(GemmBackend::onednn, GemmPrecision::bf16);
  const int64_t m = 300, n = 64, k = 120;
  const std::vector<float> a = random_floats(m * k, 40), b = random_floats(k * n, 41);
  std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
  const auto call = [&](std::vector<float>& c) {
    return detail::GemmCall<float>{true, false, m, n, k, a.data(), m, b.data(), n, c.data(), n};
  };
  ASSERT_GT(call(want).blocks(), 1);
  detail::parallel_gemms<float>({call(want)});
  const GemmTimes t = gemm_time_inside_and_alone([&] { detail::parallel_gemms<float>({call(got)}); }, 2);
  EXPECT_EQ(t.calls, call(got).blocks());
  EXPECT_GT(t.alone_ms, 0.0);
  EXPECT_EQ(got, want);
}

// Under F32Gemms a bf16 setting computes exactly the f32 product.
TEST(Bf16Gemm, TheF32GuardGivesTheF32BitsUnderBf16) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t m = 64, n = 48, k = 96;
  const std::vector<float> a = random_floats(m * k, 8), b = random_floats(k * n, 9);
  std::vector<float> f32(static_cast<std::size_t>(m * n)), guarded(f32.size()), bf16(f32.size());
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    {
      const Scope scope(backend, GemmPrecision::f32);
      detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, f32.data(), n);
    }
    const Scope scope(backend, GemmPrecision::bf16);
    detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, bf16.data(), n);
    {
      const F32Gemms f32_gemms;
      detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, guarded.data(), n);
    }
    EXPECT_EQ(guarded, f32) << gemm_backend_name(backend);
    EXPECT_NE(bf16, f32) << gemm_backend_name(backend);
  }
}

// float64 products never change with the precision.
TEST(Bf16Gemm, Float64IsUntouched) {
  const int64_t m = 5, n = 4, k = 7;
  std::vector<double> a(m * k), b(k * n), c1(m * n), c2(m * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1.0 + 1e-6 * static_cast<double>(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.0 / (1.0 + static_cast<double>(i));
  detail::gemm<double>(false, false, m, n, k, a.data(), k, b.data(), n, c1.data(), n);
  const Scope scope(gemm_backend(), GemmPrecision::bf16);
  detail::gemm<double>(false, false, m, n, k, a.data(), k, b.data(), n, c2.data(), n);
  EXPECT_EQ(c1, c2);
}

// bench's bf16 yardstick is the unit oneDNN's bf16 matmul runs on: AMX's
// tile product where the CPU has it (16 x 16 x 32 multiply-adds an
// instruction, 16 times the FMA unit's work per cycle), else vdpbf16ps.
TEST(GemmPeak, TheBf16PeakIsTheWidestBf16Unit) {
  const FmaPeak bf16 = bf16_peak(1), fma = fma_peak(1);
  ASSERT_GT(fma.gflops, 0.0);
  // Linux grants the tile state on request (arch_prctl ARCH_REQ_XCOMP_PERM,
  // XTILEDATA); a kernel that refuses it leaves AMX to no one, oneDNN included.
  constexpr int kReqXcompPerm = 0x1023, kXtiledata = 18;
  if (cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0) {
    EXPECT_STREQ(bf16.isa, "AMX-BF16 tdpbf16ps");
    EXPECT_GT(bf16.gflops, 4 * fma.gflops) << "the tile loop runs far below AMX's rate";
  } else if (cpu_has_avx512_bf16()) {
    EXPECT_STREQ(bf16.isa, "AVX512_BF16 vdpbf16ps");
    EXPECT_GT(bf16.gflops, 0.0);
  } else {
    EXPECT_STREQ(bf16.isa, "none");
    EXPECT_EQ(bf16.gflops, 0.0);
  }
}

}  // namespace
}  // namespace headlab::core

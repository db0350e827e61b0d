// The GEMM interface (core/gemm.h): both backends against a double-precision
// reference on every transpose, leading dimensions wider than the matrix,
// alpha and beta; the same bits on a repeat; backend selection by name; the
// kernel listing from oneDNN's verbose output.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention_kernels.h"
#include "core/gemm.h"
#include "core/gemm_kernels.h"
#include "core/gemm_replay.h"
#include "core/random.h"
#include "tests/core/gemm_test_util.h"
#include "tests/precision.h"
#include "core/tensor.h"

namespace headlab::core {
namespace {

// Restores the backend a test changed.
class BackendScope {
 public:
  explicit BackendScope(GemmBackend b) : previous_(gemm_backend()) { set_gemm_backend(b); }
  ~BackendScope() { set_gemm_backend(previous_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  GemmBackend previous_;
};

using test::random_floats;

class GemmCase : public ::testing::TestWithParam<std::tuple<GemmBackend, bool, bool, float, float>> {};

TEST_P(GemmCase, MatchesDoubleReference) {
  const auto [backend, ta, tb, alpha, beta] = GetParam();
  const BackendScope scope(backend);
  const int64_t m = 37, n = 21, k = 50;
  // Leading dimensions wider than the stored rows, as the attention heads' blocks are.
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
  const std::vector<float> a = random_floats((ta ? k : m) * lda, 1), b = random_floats((tb ? n : k) * ldb, 2);
  std::vector<float> c = random_floats(m * ldc, 3);
  const std::vector<float> c0 = c;
  detail::gemm<float>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, alpha, beta);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) {  // padding past n is never written
        EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]);
        continue;
      }
      const test::ReferenceEntry ref = test::reference_entry(ta, tb, k, a.data(), lda, b.data(), ldb, i, j);
      const double want = alpha * ref.value + beta * static_cast<double>(c0[i * ldc + j]);
      // In bf16 (the suite's bf16 pass) the operands' rounding adds its own bound.
      EXPECT_NEAR(c[i * ldc + j], want,
                  1e-4 * (1 + std::abs(want)) + headlab::test::bf16_rounding_bound(std::abs(alpha) * ref.size))
          << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, GemmCase,
                         ::testing::Combine(::testing::Values(GemmBackend::onednn, GemmBackend::openblas),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Values(1.0f, 0.25f),
                                            ::testing::Values(0.0f, 1.0f)));

TEST(Gemm, SameBitsOnRepeatAndInsideAParallelRegion) {
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const BackendScope scope(backend);
    const int64_t m = 96, n = 80, k = 300;
    const std::vector<float> a = random_floats(m * k, 4), b = random_floats(k * n, 5);
    std::vector<float> first(static_cast<std::size_t>(m * n)), again(first.size());
    detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, first.data(), n);
    // Each thread computes the same product (a primitive per thread, created there).
    std::vector<std::vector<float>> per_thread(4, std::vector<float>(first.size()));
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < 4; ++t)
      detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, per_thread[t].data(), n);
    detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, again.data(), n);
    EXPECT_EQ(first, again) << gemm_backend_name(backend);
    for (const auto& got : per_thread) EXPECT_EQ(first, got) << gemm_backend_name(backend);
  }
}

// Attention's layout: q, k [B, T, d] with head h in columns h*dk..; scores
// S [B, H, T, T] = alpha Q_h K_h^T, then O [B, T, d] = S_h V_h.
TEST(Gemm, BatchedHeadsMatchTheSingleProducts) {
  const int64_t B = 3, H = 4, T = 9, dk = 5, d = H * dk;
  const std::vector<float> q = random_floats(B * T * d, 6), k = random_floats(B * T * d, 7);
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const BackendScope scope(backend);
    std::vector<float> s(static_cast<std::size_t>(B * H * T * T)), o(static_cast<std::size_t>(B * T * d), 5.0f);
    detail::BatchedGemm<float> qk = test::qk_heads(q.data(), k.data(), s.data(), B, H, T, dk);
    qk.alpha = 0.5f;
    detail::batched_gemm(qk);
    detail::BatchedGemm<float> sv;
    sv.m = T, sv.n = dk, sv.k = T, sv.outer = B, sv.inner = H;
    sv.a = s.data(), sv.lda = T, sv.a_stride[0] = H * T * T, sv.a_stride[1] = T * T;
    sv.b = k.data(), sv.ldb = d, sv.b_stride[0] = T * d, sv.b_stride[1] = dk;
    sv.c = o.data(), sv.ldc = d, sv.c_stride[0] = T * d, sv.c_stride[1] = dk;
    sv.beta = 1.0f;  // adds to the 5s already there
    detail::batched_gemm(sv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        std::vector<float> s1(static_cast<std::size_t>(T * T)), o1(static_cast<std::size_t>(T * dk), 5.0f);
        detail::gemm<float>(false, true, T, T, dk, q.data() + b * T * d + h * dk, d, k.data() + b * T * d + h * dk, d,
                            s1.data(), T, 0.5f);
        detail::gemm<float>(false, false, T, dk, T, s1.data(), T, k.data() + b * T * d + h * dk, d, o1.data(), dk, 1.0f,
                            1.0f);
        for (int64_t i = 0; i < T; ++i) {
          for (int64_t j = 0; j < T; ++j)
            EXPECT_NEAR(s[((b * H + h) * T + i) * T + j], s1[i * T + j], 1e-5) << gemm_backend_name(backend);
          for (int64_t j = 0; j < dk; ++j)
            EXPECT_NEAR(o[(b * T + i) * d + h * dk + j], o1[i * dk + j], 1e-4) << gemm_backend_name(backend);
        }
      }
  }
}

TEST(Gemm, BackendsByName) {
  EXPECT_EQ(parse_gemm_backend("onednn"), GemmBackend::onednn);
  EXPECT_EQ(parse_gemm_backend("openblas"), GemmBackend::openblas);
  EXPECT_STREQ(gemm_backend_name(GemmBackend::onednn), "onednn");
  EXPECT_STREQ(gemm_backend_name(GemmBackend::openblas), "openblas");
  try {
    parse_gemm_backend("mkl");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'mkl'"), std::string::npos) << e.what();
  }
}

// OpenBLAS on a CPU it does not know runs its generic x86-64 kernels: the
// rule names the ones the CPU's features allow, unless OPENBLAS_CORETYPE is
// set (the user's choice stands) or OpenBLAS chose well.
TEST(Gemm, OpenBlasGenericKernelsNameTheCoretypeTheCpuAllows) {
  EXPECT_EQ(better_openblas_coretype("Prescott", false, true, true), "SkylakeX");
  EXPECT_EQ(better_openblas_coretype("PRESCOTT", false, false, true), "Haswell");
  EXPECT_EQ(better_openblas_coretype("Nehalem", false, false, true), "Haswell");
  EXPECT_EQ(better_openblas_coretype("Core2", false, false, false), "");
  EXPECT_EQ(better_openblas_coretype("Prescott", true, true, true), "");
  EXPECT_EQ(better_openblas_coretype("SkylakeX", false, true, true), "");
  EXPECT_EQ(better_openblas_coretype("Haswell", false, true, true), "");
  EXPECT_EQ(better_openblas_coretype("Zen", false, true, true), "");
  // This process: the library's own choice, and a note exactly where there is advice.
  EXPECT_FALSE(openblas_kernels().empty());
  const std::string better = openblas_better_coretype();
  EXPECT_EQ(openblas_fallback_note().empty(), better.empty());
  if (!better.empty()) {
    EXPECT_NE(openblas_fallback_note().find("OPENBLAS_CORETYPE=" + better), std::string::npos)
        << openblas_fallback_note();
  }
}

// --- Which oneDNN kernel ran (core/gemm_kernels.h) ---

TEST(GemmKernels, ParsesExecLinesOfMatmulsAndCountsRepeats) {
  const std::string text =
      "onednn_verbose,info,oneDNN v2.6.3 (commit N/A)\n"
      "onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0 "
      "dst_f32::blocked:ab:f0,attr-scratchpad:user ,,8x4:4x6:8x6,0.25\n"
      "onednn_verbose,exec,cpu,reorder,simple:any,undef,src_f32::blocked:ab:f0 dst_f32::blocked:ba:f0,,,8x4,0.5\n"
      "onednn_verbose,exec,cpu,matmul,gemm:jit,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0 "
      "dst_f32::blocked:ab:f0,attr-scratchpad:user ,,8x4:4x6:8x6,0.5\n"
      "onednn_verbose,exec,cpu,matmul,brg:avx512_core,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ba:f0 "
      "dst_f32::blocked:ab:f0,attr-scratchpad:user attr-oscale:0:0.5 ,,2x3:3x5:2x5,1\n";
  const std::vector<GemmKernelUse> uses = parse_onednn_verbose(text);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].kernel, "gemm:jit");
  EXPECT_EQ(uses[0].shapes, "8x4:4x6:8x6");
  EXPECT_EQ(uses[0].calls, 2);
  EXPECT_DOUBLE_EQ(uses[0].ms, 0.75);
  EXPECT_EQ(uses[1].kernel, "brg:avx512_core");
  EXPECT_EQ(uses[1].attrs, "attr-scratchpad:user attr-oscale:0:0.5");
  EXPECT_EQ(uses[1].calls, 1);
}

TEST(GemmKernels, NamesTheKernelOfEachProductRun) {
  const BackendScope scope(GemmBackend::onednn);
  // Above the products headlab runs in its own loops (core/gemm.h), which
  // the emulated bf16 products of the suite's bf16 pass would reach.
  const int64_t m = 64, n = 48, k = 40;
  const std::vector<float> a = random_floats(m * k, 8), b = random_floats(k * n, 9);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const std::vector<GemmKernelUse> uses = gemm_kernels_of([&] {
    for (int i = 0; i < 3; ++i) detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n);
  });
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_FALSE(uses[0].kernel.empty());
  EXPECT_EQ(uses[0].shapes, "64x40:40x48:64x48");
  EXPECT_EQ(uses[0].calls, 3);
  // Verbose mode is off again afterwards: nothing more is listed.
  EXPECT_TRUE(gemm_kernels_of([] {}).empty());
}

// On OpenBLAS each call is listed on its own, in oneDNN's form (core/
// gemm_kernels.h): bench --kernels works on either backend.
TEST(GemmKernels, ListsOpenBlasCallsInOneDnnsForm) {
  const BackendScope scope(GemmBackend::openblas);
  const F32Gemms f32;  // the suite's bf16 pass would take cblas_sbgemm where the library has it
  const int64_t m = 64, n = 48, k = 40;
  const std::vector<float> a = random_floats(m * k, 8), b = random_floats(k * n, 9);
  std::vector<float> c(static_cast<std::size_t>(m * n));
  const std::vector<GemmKernelUse> uses = gemm_kernels_of([&] {
    for (int i = 0; i < 3; ++i) detail::gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n);
    detail::gemm<float>(false, true, m, n, k, a.data(), k, b.data(), k, c.data(), n);
  });
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].kernel, "openblas");
  EXPECT_EQ(uses[0].shapes, "64x40:40x48:64x48");
  EXPECT_EQ(uses[0].layouts, "src_f32:ab wei_f32:ab dst_f32:ab");
  EXPECT_EQ(uses[0].calls, 3);
  EXPECT_GT(uses[0].ms, 0);
  EXPECT_EQ(uses[1].layouts, "src_f32:ab wei_f32:ba dst_f32:ab");
  EXPECT_EQ(uses[1].calls, 1);
}

// The attention scale is applied outside QK^T: no product of the forward
// carries an output scale (one takes oneDNN off its fastest kernels). T 40,
// d_k 32: products large enough for oneDNN (small ones run in headlab's
// loops, core/gemm.h).
TEST(GemmKernels, AttentionForwardPassesNoOutputScaleToItsProducts) {
  const BackendScope scope(GemmBackend::onednn);
  const int64_t B = 2, T = 40, d = 64;
  const auto tensor = [&](uint64_t seed) {
    const std::vector<float> v = random_floats(B * T * d, seed);
    return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {B, T, d}, DType::f32);
  };
  const Tensor q = tensor(10), k = tensor(11), v = tensor(12);
  const AttentionShape shape{.heads = 2, .causal = true, .scale = 0.5};
  const std::vector<GemmKernelUse> uses =
      gemm_kernels_of([&] { attention_forward(q, k, v, shape, Tensor(), Tensor()); });
  ASSERT_EQ(uses.size(), 2u);  // Q K^T and P V
  for (const GemmKernelUse& u : uses) {
    EXPECT_NE(u.kernel, "loops") << u.shapes;
    EXPECT_EQ(u.attrs.find("oscale"), std::string::npos) << u.attrs;
  }
}

// gemm_time_inside_and_alone counts each product the work runs once (a
// batched call is one; the calls a recorded product makes inside itself
// are not counted again), times it, leaves its result as it would be, and
// replays it alone; and it adds the calls of one shape up.
TEST(GemmReplay, TimesEachProductOnceAndLeavesItsResult) {
  for (const GemmBackend backend : {GemmBackend::onednn, GemmBackend::openblas}) {
    const BackendScope scope(backend);
    const int64_t m = 64, n = 48, k = 32, B = 2, T = 8, H = 2, dk = 4;
    const std::vector<float> a = random_floats(m * k, 1), b = random_floats(k * n, 2);
    const std::vector<float> q = random_floats(B * T * H * dk, 3), kk = random_floats(B * T * H * dk, 4);
    std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
    std::vector<float> s_want(static_cast<std::size_t>(B * H * T * T)), s_got(s_want.size());
    const std::vector<double> x{1, 2, 3, 4};
    std::vector<double> y(4);
    const auto f32_work = [&](std::vector<float>& c, std::vector<float>& s) {
      detail::gemm<float>(false, true, m, n, k, a.data(), k, b.data(), k, c.data(), n);
      detail::gemm<float>(false, true, m, n, k, a.data(), k, b.data(), k, c.data(), n);  // the same shape again
      detail::batched_gemm(test::qk_heads(q.data(), kk.data(), s.data(), B, H, T, dk));
      detail::gemm<double>(false, false, 2, 2, 2, x.data(), 2, x.data(), 2, y.data(), 2);  // float64: not counted
    };
    f32_work(want, s_want);
    const GemmTimes t = gemm_time_inside_and_alone([&] { f32_work(got, s_got); }, 2);
    EXPECT_EQ(t.calls, 3) << gemm_backend_name(backend);
    EXPECT_GT(t.inside_ms, 0.0);
    EXPECT_GT(t.alone_ms, 0.0);
    ASSERT_EQ(t.shapes.size(), 2u);
    // The precision the products ran in (bf16 in the suite's bf16 pass).
    const std::string precision = gemm_precision() == GemmPrecision::bf16 ? "bf16 " : "f32 ";
    double inside = 0, alone = 0;
    for (const GemmShapeTimes& g : t.shapes) {
      inside += g.inside_ms, alone += g.alone_ms;
      if (g.shape == precision + "1 x NT 64x48x32") EXPECT_EQ(g.calls, 2);
      else EXPECT_EQ(g.shape, precision + "4 x NT 8x8x4") << "B x H heads, Q K^T";
    }
    EXPECT_NEAR(inside, t.inside_ms, 1e-9);
    EXPECT_NEAR(alone, t.alone_ms, 1e-9);
    EXPECT_GE(t.shapes[0].inside_ms - t.shapes[0].alone_ms, t.shapes[1].inside_ms - t.shapes[1].alone_ms);
    EXPECT_EQ(got, want) << gemm_backend_name(backend);
    EXPECT_EQ(s_got, s_want) << gemm_backend_name(backend);
    // Nothing is recorded afterwards.
    const GemmTimes none = gemm_time_inside_and_alone([] {});
    EXPECT_EQ(none.calls, 0);
    EXPECT_EQ(none.alone_ms, 0.0);
  }
}

}  // namespace
}  // namespace headlab::core

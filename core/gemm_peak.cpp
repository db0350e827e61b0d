// The FMA peak, and the bf16 dot-product peak: see gemm_peak.h.
//
// One loop per instruction set, each compiled for its own target and picked
// by __builtin_cpu_supports, so a build for an older CPU still measures a
// newer one's full width. Twelve accumulators cover the FMA latency (4
// cycles) times the FMA units (2) with room to spare. The operands keep the
// accumulators bounded (x -> 0.999999 x + 1e-7 converges to 0.1), so no
// denormals or infinities slow the loop.
#include "core/gemm_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/cpu_features.h"

namespace headlab::core {
namespace {

constexpr int kAccumulators = 12;
// Where the loops' results go, so that the compiler keeps the loops.
std::atomic<double> g_sink{0};
// Short timings, many of them: the best of 30 ~1 ms loops is a timing no
// other process interrupted, even on a busy machine (10 ms loops measured
// a quarter of the peak with four compilers on the two cores).
constexpr int64_t kIterations = 1 << 18;
constexpr int kTimings = 30;

// Each returns a value of the accumulators so the compiler cannot drop the loop.
__attribute__((target("avx512f"))) float sum_of(const __m512 (&acc)[kAccumulators]) {
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (const float v : lanes) total += v;
  return total;
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  return sum_of(acc);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iterations) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (const float v : lanes) total += v;
  return total;
}

__attribute__((target("sse2"))) float mul_add_loop_sse2(int64_t iterations) {
  __m128 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_set1_ps(static_cast<float>(i));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], a), b);
  __m128 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm_add_ps(sum, acc[i]);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// x -> x + 2 * (1e-4 * 1e-4) per lane: the accumulators stay small and normal.
__attribute__((target("avx512f,avx512bf16"))) float dot_loop_avx512_bf16(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  return sum_of(acc);
}

struct Isa {
  const char* name;
  int flops;  // per instruction of the loop
  float (*loop)(int64_t);
};

Isa widest_isa() {
  __builtin_cpu_init();
  // Two flops (a multiply and an add) per float lane.
  if (__builtin_cpu_supports("avx512f")) return {"AVX-512", 2 * 16, fma_loop_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"AVX2+FMA", 2 * 8, fma_loop_avx2};
  return {"SSE2", 2 * 4, mul_add_loop_sse2};
}

FmaPeak peak_of(const Isa& isa, int threads) {
  threads = std::max(1, threads);
  double best = 0;
  for (int rep = 0; rep < kTimings; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += isa.loop(kIterations);
    g_sink.store(total, std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flops = static_cast<double>(isa.flops) * kAccumulators * static_cast<double>(kIterations) * threads;
    best = std::max(best, flops / s / 1e9);
  }
  return {isa.name, best};
}

}  // namespace

FmaPeak fma_peak(int threads) { return peak_of(widest_isa(), threads); }

FmaPeak bf16_dot_peak(int threads) {
  if (!cpu_has_avx512_bf16()) return {"none", 0};
  // Per instruction: 16 lanes x 2 bf16 products, each a multiply and an add.
  return peak_of({"AVX512_BF16 vdpbf16ps", 16 * 2 * 2, dot_loop_avx512_bf16}, threads);
}

}  // namespace headlab::core

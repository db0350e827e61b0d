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
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/bf16.h"
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
// Not instrumented by the sanitizers: they touch nothing but their registers,
// and under AddressSanitizer the accumulators would live in checked stack
// memory, a loop 45x slower (3.7 GFLOP/s), measuring nothing and costing
// each bench a second in the sanitizer build's tests.
#define HEADLAB_PEAK_LOOP(isa) __attribute__((target(isa), no_sanitize("address", "undefined")))
HEADLAB_PEAK_LOOP("avx512f") float sum_of(const __m512 (&acc)[kAccumulators]) {
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (const float v : lanes) total += v;
  return total;
}

HEADLAB_PEAK_LOOP("avx512f") float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  return sum_of(acc);
}

HEADLAB_PEAK_LOOP("avx2,fma") float fma_loop_avx2(int64_t iterations) {
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

HEADLAB_PEAK_LOOP("sse2") float mul_add_loop_sse2(int64_t iterations) {
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
HEADLAB_PEAK_LOOP("avx512f,avx512bf16") float dot_loop_avx512_bf16(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  return sum_of(acc);
}

// AMX: eight tile registers of 16 rows x 64 bytes. Tiles 0-3 accumulate
// C (16 x 16 f32 each) from A in tiles 4-5 (16 x 32 bf16) and B in tiles
// 6-7 (16 pairs of rows x 16 columns, the pairs interleaved): a 2 x 2 block
// of independent tdpbf16ps, each 16 x 16 x 32 multiply-adds.
struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
constexpr int kAmxProducts = 4;                     // per iteration
constexpr int kAmxFlops = 2 * 16 * 16 * 32;         // per tdpbf16ps
constexpr int64_t kAmxIterations = kIterations / 4;  // a tile product takes 16 cycles: ~1 ms, as the others

HEADLAB_PEAK_LOOP("amx-tile,amx-bf16") float amx_loop_bf16(int64_t iterations) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  _tile_loadconfig(&config);
  alignas(64) bf16_t operand[16 * 32];
  std::fill(std::begin(operand), std::end(operand), to_bf16(1e-4f));  // C grows by 32e-8 a product: stays normal
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[4][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  _tile_release();
  return c[0][0] + c[1][17] + c[2][34] + c[3][255];
}

// Linux hands a process the AMX tile state only when asked (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA); oneDNN asks too. False where it is
// refused or the CPU has no AMX-BF16.
bool amx_usable() {
  static const bool usable = [] {
    constexpr int kReqXcompPerm = 0x1023, kXtiledata = 18;
    return cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return usable;
}

struct Isa {
  const char* name;
  double flops;  // per iteration of the loop
  float (*loop)(int64_t);
  int64_t iterations = kIterations;
};

Isa widest_isa() {
  __builtin_cpu_init();
  // Two flops (a multiply and an add) per float lane, for each accumulator.
  if (__builtin_cpu_supports("avx512f")) return {"AVX-512", 2 * 16 * kAccumulators, fma_loop_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"AVX2+FMA", 2 * 8 * kAccumulators, fma_loop_avx2};
  return {"SSE2", 2 * 4 * kAccumulators, mul_add_loop_sse2};
}

FmaPeak peak_of(const Isa& isa, int threads) {
  threads = std::max(1, threads);
  double best = 0;
  for (int rep = 0; rep < kTimings; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += isa.loop(isa.iterations);
    g_sink.store(total, std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flops = isa.flops * static_cast<double>(isa.iterations) * threads;
    best = std::max(best, flops / s / 1e9);
  }
  return {isa.name, best};
}

}  // namespace

FmaPeak fma_peak(int threads) { return peak_of(widest_isa(), threads); }

FmaPeak bf16_peak(int threads) {
  if (amx_usable()) return peak_of({"AMX-BF16 tdpbf16ps", kAmxProducts * kAmxFlops, amx_loop_bf16, kAmxIterations}, threads);
  if (!cpu_has_avx512_bf16()) return {"none", 0};
  // Per instruction: 16 lanes x 2 bf16 products, each a multiply and an add.
  return peak_of({"AVX512_BF16 vdpbf16ps", 16 * 2 * 2 * kAccumulators, dot_loop_avx512_bf16}, threads);
}

}  // namespace headlab::core

// Internal: headlab's threads over the GEMMs of core/gemm.h.
//
// A backend's GEMM always runs single-threaded; headlab's threads split the
// work above it, into blocks fixed by the shape alone, so the bits never
// depend on the thread count. One fork and one join cover all the products
// handed in at once (a Linear's backward passes both of its products).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstdint>
#include <stdexcept>

#include "core/gemm.h"
#include "core/threads.h"

namespace headlab::core::detail {

// One GEMM's arguments, as for detail::gemm() (core/gemm.h).
template <class T>
struct GemmCall {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const T* a = nullptr;
  int64_t lda = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  T* c = nullptr;
  int64_t ldc = 0;
  T alpha = T(1), beta = T(0);

  // Blocks of C's rows (or columns, when C is wider than tall): a power of
  // two, one per kGemmBlockWork multiply-adds, at most kMaxGemmBlocks, each
  // at least 16 rows (or columns). They depend on the shape only, so the bits
  // never depend on the thread count. Every block packs its own copy of the
  // shared operand, so more blocks cost single-threaded speed: 16 made the
  // small preset's 1-thread step 6% slower than 4, for no gain on 2 threads.
  int64_t blocks() const {
    const int64_t extent = m >= n ? m : n;
    int64_t count = 1;
    while (count < kMaxGemmBlocks && m * n * k >= 2 * count * kGemmBlockWork && extent >= 2 * count * 16) count *= 2;
    return count;
  }

  // Computes block `blk` of `count`; block edges fall on multiples of 16,
  // which keeps BLAS's register tiles whole.
  void run_block(int64_t blk, int64_t count) const {
    const bool by_rows = m >= n;
    const int64_t extent = by_rows ? m : n;
    const int64_t step = (extent / count + 15) / 16 * 16;
    const int64_t start = std::min(extent, blk * step);
    const int64_t end = blk + 1 == count ? extent : std::min(extent, start + step);
    if (end <= start) return;
    if (by_rows) {  // rows start..end of op(A) and C
      gemm<T>(ta, tb, end - start, n, k, ta ? a + start : a + start * lda, lda, b, ldb, c + start * ldc, ldc, alpha,
              beta);
    } else {  // columns start..end of op(B) and C
      gemm<T>(ta, tb, m, end - start, k, a, lda, tb ? b + start * ldb : b + start, ldb, c + start, ldc, alpha, beta);
    }
  }
};

// Independent GEMMs (no output overlaps another's input or output), their
// blocks shared by the threads in one parallel region: one fork and one join
// for all of them. Blocks are handed out dynamically: on a busy machine a
// thread that runs keeps taking blocks while a descheduled one holds none.
// At most kMaxGemmCalls of them, so the block list lives on the stack: the
// training step calls this for every Linear and allocates nothing here.
constexpr std::size_t kMaxGemmCalls = 4;
template <class T>
void parallel_gemms(std::initializer_list<GemmCall<T>> calls) {
  struct Block {
    const GemmCall<T>* call;
    int64_t index, count;
  };
  static_assert(kMaxGemmBlocks > 0);
  std::array<Block, kMaxGemmCalls * kMaxGemmBlocks> blocks;
  if (calls.size() > kMaxGemmCalls) throw std::logic_error("parallel_gemms: more than kMaxGemmCalls products");
  int64_t total = 0;
  for (const GemmCall<T>& c : calls) {
    if (c.m == 0 || c.n == 0) continue;
    const int64_t count = c.blocks();
    for (int64_t i = 0; i < count; ++i) blocks[static_cast<std::size_t>(total++)] = Block{&c, i, count};
  }
  if (total <= 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < total; ++i) blocks[i].call->run_block(blocks[i].index, blocks[i].count);
    return;
  }
  int cpus[kMaxTrackedThreads];
  std::fill(cpus, cpus + kMaxTrackedThreads, -1);
#pragma omp parallel
  {
    if (omp_get_thread_num() < kMaxTrackedThreads) cpus[omp_get_thread_num()] = current_cpu();
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < total; ++i) blocks[i].call->run_block(blocks[i].index, blocks[i].count);
  }
  spread_if_shared(cpus, std::min(omp_get_max_threads(), kMaxTrackedThreads));
}

}  // namespace headlab::core::detail

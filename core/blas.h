// Internal: headlab's threads over the GEMMs of core/gemm.h.
//
// A backend's GEMM always runs single-threaded; headlab's threads split the
// work above it, into blocks fixed by the shape alone, so the bits are the
// same at any thread count above one. A product on one thread (a 1-thread
// process, a lane of the training step) runs whole. One fork and one join
// cover all the products handed in at once (a Linear's backward passes both
// of its products).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/gemm.h"
#include "core/threads.h"

namespace headlab::core {
class Storage;
}

namespace headlab::core::detail {

// Block blk of count over an extent of rows (or columns): [start, end),
// edges on multiples of 16, which keeps BLAS's register tiles whole. A
// trailing block may be empty (start == end).
struct BlockRange {
  int64_t start = 0, end = 0;
};
inline BlockRange block_range(int64_t extent, int64_t blk, int64_t count) {
  const int64_t step = (extent / count + 15) / 16 * 16;
  const int64_t start = std::min(extent, blk * step);
  return {start, blk + 1 == count ? extent : std::min(extent, start + step)};
}

// Whether the products started here run on this thread alone: in a
// 1-thread process, or inside a parallel region (a lane of the training
// step, train/step_lanes.h, or any other), where run_calls opens no region
// of its own.
inline bool on_one_thread() { return omp_in_parallel() || omp_get_max_threads() == 1; }

// One GEMM's arguments, as for detail::gemm() (core/gemm.h). Op is the
// operands' type: T, or bf16_t for float products whose operands were
// already rounded and packed (bf16 mixed precision, parallel_gemms).
// a_owner / b_owner, when given, are the storages A and B lie in: in bf16
// mixed precision, inside a Bf16Operands scope, the operand's rounded copy
// is then kept for (or taken from) the scope's other products
// (core/bf16_operands.h). Give them only for operands that nothing writes
// while the scope is open: a Linear's input and weight. b_rounded, in bf16
// precision only, is B's rounded copy, dense in B's stored layout, given
// instead of b (null) when B's float32 values are gone: a Linear's input in
// its backward's dW = g^T x (core/bf16_operands.h, held_bf16_copy).
// a_rounded, likewise, is A's rounded copy given instead of a: a Linear
// backward's output gradient g that exists only rounded
// (core::gelu_backward_rounded).
// bias, if given (beta 0 and alpha 1), is a row of n added to every row of
// C by the product itself (core/gemm.h): a Linear's forward.
template <class T, class Op = T>
struct GemmCall {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const Op* a = nullptr;
  int64_t lda = 0;
  const Op* b = nullptr;
  int64_t ldb = 0;
  T* c = nullptr;
  int64_t ldc = 0;
  T alpha = T(1), beta = T(0);
  const std::shared_ptr<Storage>* a_owner = nullptr;
  const std::shared_ptr<Storage>* b_owner = nullptr;
  const bf16_t* b_rounded = nullptr;
  const bf16_t* a_rounded = nullptr;
  // In bf16 precision, on oneDNN, set by pack_operands for a product split
  // by rows of op(A) whose A is rounded in this call and read whole by no
  // other product of it (a Linear backward's output gradient g: by rows of
  // g in dx = g W, by columns of g in dW = g^T x when out >= in): A's
  // float32 values, stored with leading dimension a_source_ld. Each block
  // rounds its own part of A densely into its thread's buffer
  // (rounded_rows) and the product reads it there, in cache. A rounded
  // whole would cost a pass writing all of A and, for a block of A^T's rows,
  // strided in A, a copy of the block out of it (dense_block).
  const float* a_source = nullptr;
  int64_t a_source_ld = 0;
  const T* bias = nullptr;

  // Blocks of C's rows (or columns, when C is wider than tall), for the
  // threads to share: a power of two, one per kGemmBlockWork multiply-adds,
  // at most kMaxGemmBlocks, each at least 16 rows (or columns). They depend
  // on the shape only, so the bits are the same at 2 threads or 64. Every
  // block packs its own copy of the shared operand, so more blocks cost
  // single-threaded speed: 16 made the small preset's 1-thread step 6%
  // slower than 4, for no gain on 2 threads.
  //
  // A product on one thread (on_one_thread) runs whole: there its blocks
  // only cost, in copies of strided blocks, per-block rounding and oneDNN
  // calls on smaller shapes (2-14% of a 1-thread step, docs/performance.md
  // "Products whole on one thread"). oneDNN's bf16 kernels sum a block's
  // products in another order than the whole's, so a product's bits on one
  // thread and on several may differ: results are reproducible per thread
  // count, as the README promises, not across thread counts.
  int64_t blocks() const { return on_one_thread() ? 1 : blocks_by_shape(); }
  int64_t blocks_by_shape() const {
    const int64_t extent = by_rows() ? m : n;
    int64_t count = 1;
    while (count < kMaxGemmBlocks && m * n * k >= 2 * count * kGemmBlockWork && extent >= 2 * count * 16) count *= 2;
    return count;
  }

  // Split by rows of op(A) and C, else by columns of op(B) and C.
  bool by_rows() const { return m >= n; }

  // Computes block `blk` of `count` (block_range).
  void run_block(int64_t blk, int64_t count) const {
    const auto [start, end] = block_range(by_rows() ? m : n, blk, count);
    if (end <= start) return;
    if (by_rows()) {  // rows start..end of op(A) and C
      const int64_t rows = end - start;
      const Op* dense = a_source != nullptr ? rounded_rows(start, rows)
                        : ta                  ? dense_block(a, lda, start, rows, k)
                                              : nullptr;
      if (dense != nullptr) {
        product(ta, tb, rows, n, k, dense, ta ? rows : k, b, ldb, c + start * ldc, ldc, bias);
        return;
      }
      product(ta, tb, rows, n, k, ta ? a + start : a + start * lda, lda, b, ldb, c + start * ldc, ldc, bias);
    } else {  // columns start..end of op(B) and C
      if (!tb && beta == T(0)) {
        if (const Op* dense = dense_block(b, ldb, start, end - start, k)) {
          // C's block is strided too, and a strided C also keeps oneDNN off
          // brgemm: the block lands in a dense buffer first.
          const int64_t width = end - start;
          T* out = dense_output(m * width);
          product(ta, tb, m, width, k, a, lda, dense, width, out, width, bias ? bias + start : nullptr);
          for (int64_t r = 0; r < m; ++r) std::copy_n(out + r * width, width, c + r * ldc + start);
          return;
        }
      }
      product(ta, tb, m, end - start, k, a, lda, tb ? b + start * ldb : b + start, ldb, c + start, ldc,
              bias ? bias + start : nullptr);
    }
  }

 private:
  // Columns start..start+width of a stored [lines, ld] operand, copied
  // densely into this thread's buffer: the block of a weight gradient's
  // operand that a split by rows of op(A) = g^T, or by columns of B = x,
  // leaves strided. oneDNN 2.6 runs a product with a strided operand (or a
  // strided C) on its older gemm:jit kernels and a dense one on brgemm,
  // faster on these shapes on AVX-512 (64-256 x 256 x 2048 at 1 thread, Zen
  // 5: f32 187-217 GFLOP/s strided, 225-236 dense; bf16 365-380 strided,
  // 408-441 dense). The copy reads the block once more, a few percent of
  // the product's time. oneDNN only (OpenBLAS packs its own); in f32 only at
  // f32 precision (bf16 products get Op = bf16_t). Null when the block is
  // dense already. In bf16 a block of g^T's rows is rounded by its block
  // instead (a_source); what is copied here there is x's column block (x
  // was rounded in the forward) and an A whose rounded copy came from the
  // scope.
  const Op* dense_block(const Op* base, int64_t ld, int64_t start, int64_t width, int64_t lines) const {
    if constexpr (std::is_same_v<Op, float> || std::is_same_v<Op, bf16_t>) {
      if (width == ld || gemm_backend() != GemmBackend::onednn) return nullptr;
      if (std::is_same_v<Op, float> && gemm_precision() != GemmPrecision::f32) return nullptr;
      thread_local std::vector<Op> buffer;  // blocks run on many threads at once
      const auto size = static_cast<std::size_t>(width * lines);
      if (buffer.size() < size) buffer.resize(size);
      for (int64_t r = 0; r < lines; ++r) std::copy_n(base + r * ld + start, width, buffer.data() + r * width);
      return buffer.data();
    } else {
      (void)base, (void)ld, (void)start, (void)width, (void)lines;
      return nullptr;
    }
  }

  // Rows start..start+rows of op(A), rounded from a_source densely into
  // this thread's buffer: [k, rows] when A is transposed (columns of the
  // stored A), else [rows, k]. The values and layout of the same block of A
  // rounded whole (and, transposed, copied dense), so the same product.
  const Op* rounded_rows(int64_t start, int64_t rows) const {
    if constexpr (std::is_same_v<Op, bf16_t>) {
      thread_local std::vector<bf16_t> buffer;  // blocks run on many threads at once
      if (buffer.size() < static_cast<std::size_t>(rows * k)) buffer.resize(static_cast<std::size_t>(rows * k));
      if (ta) pack_bf16(a_source + start, k, rows, a_source_ld, buffer.data());
      else pack_bf16(a_source + start * a_source_ld, rows, k, a_source_ld, buffer.data());
      return buffer.data();
    } else {
      (void)start, (void)rows;
      return nullptr;
    }
  }

  // This thread's buffer for a dense block of C (see run_block).
  T* dense_output(int64_t size) const {
    thread_local std::vector<T> buffer;
    if (buffer.size() < static_cast<std::size_t>(size)) buffer.resize(static_cast<std::size_t>(size));
    return buffer.data();
  }

  void product(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, const Op* a_, int64_t lda_, const Op* b_,
               int64_t ldb_, T* c_, int64_t ldc_, const T* bias_) const {
    if constexpr (std::is_same_v<Op, bf16_t>)
      packed_bf16_gemm({.ta = ta_, .tb = tb_, .m = m_, .n = n_, .k = k_, .a = a_, .lda = lda_, .b = b_, .ldb = ldb_,
                        .ldc = ldc_, .bias = bias_},
                       alpha, beta, c_);
    else
      gemm<T>(ta_, tb_, m_, n_, k_, a_, lda_, b_, ldb_, c_, ldc_, alpha, beta, bias_);
  }
};

// Independent GEMMs (no output overlaps another's input or output), their
// blocks shared by the threads in one parallel region: one fork and one join
// for all of them. Blocks are handed out dynamically: on a busy machine a
// thread that runs keeps taking blocks while a descheduled one holds none.
// At most kMaxGemmCalls of them, so the block list lives on the stack: the
// training step calls this for every Linear and allocates nothing here.
//
// In bf16 mixed precision the operands are rounded and packed once per call
// (in the same region, before its blocks), not once per block: the blocks
// share one operand whole, which per-block packing would convert up to
// kMaxGemmBlocks times. The operand a product splits by rows of op(A) is
// the exception where nothing reads it whole: each block rounds its own
// part (GemmCall::a_source), each element once per product.
constexpr std::size_t kMaxGemmCalls = 4;

// The calls' operands rounded into this thread's buffers, 2 per call (A, B),
// each packed densely: what run_calls then hands to the blocks.
// An operand stored twice in the calls (a Linear's backward reads its
// output gradient as A of dx = g W and, transposed, of dW = g^T x) is
// packed once: `same[i]` is the operand it shares a buffer with, else i.
// `ready[i]`: operand i's rounded copy was taken from the open
// Bf16Operands scope, already filled by an earlier product.
struct PackedOperands {
  std::array<GemmCall<float, bf16_t>, kMaxGemmCalls> calls;
  std::size_t count = 0;
  std::array<std::size_t, 2 * kMaxGemmCalls> same{};
  std::array<bool, 2 * kMaxGemmCalls> ready{};
  // `by_blocks[i]`: operand i is rounded by the blocks that read it
  // (GemmCall::a_source), not packed whole.
  std::array<bool, 2 * kMaxGemmCalls> by_blocks{};
};
PackedOperands pack_operands(std::initializer_list<GemmCall<float>> calls);
// Each operand is packed in kPackChunks chunks of its stored rows
// (block_range), one work item each, so that the threads share the rounding
// of a large one: a Linear's backward rounds only its output gradient (its
// weight and input were rounded in the forward), which one thread would
// otherwise round while the others wait for it.
constexpr int64_t kPackChunks = 4;
// Packs chunk `chunk` of operand `i` (A of call i / 2, or B) of `calls` into
// `packed`, sized by pack_operands.
void pack_operand(std::initializer_list<GemmCall<float>> calls, std::size_t i, int64_t chunk,
                  const PackedOperands& packed);

// x [rows, cols] (leading dimension ld) -> out [cols], each column summed in
// double, rows in order: the bits of core::sum(x, {0}) (core/ops_reduce.cpp
// folds leading rows the same way). A Linear's bias gradient, computed by
// the threads of its backward's products in their region, in blocks of
// kColumns columns, instead of in a region (and a reduction plan) of its own.
template <class T>
struct ColumnSums {
  const T* x = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  T* out = nullptr;

  static constexpr int64_t kColumns = 256;
  int64_t blocks() const { return (cols + kColumns - 1) / kColumns; }
  void run_block(int64_t blk) const {
    const int64_t c0 = blk * kColumns, n = std::min(kColumns, cols - c0);
    double acc[kColumns];
    for (int64_t c = 0; c < n; ++c) acc[c] = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * ld + c0;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) acc[c] = acc[c] + row[c];
    }
    for (int64_t c = 0; c < n; ++c) out[c0 + c] = static_cast<T>(acc[c]);
  }
};

template <class T, class Op>
void run_calls(const GemmCall<T, Op>* calls, std::size_t count, const std::initializer_list<GemmCall<float>>* to_pack,
               const PackedOperands* packed, const ColumnSums<T>* sums) {
  struct Block {
    const GemmCall<T, Op>* call;
    int64_t index, count;
  };
  static_assert(kMaxGemmBlocks > 0);
  std::array<Block, kMaxGemmCalls * kMaxGemmBlocks> blocks;
  if (count > kMaxGemmCalls) throw std::logic_error("parallel_gemms: more than kMaxGemmCalls products");
  int64_t total = 0;
  for (std::size_t j = 0; j < count; ++j) {
    const GemmCall<T, Op>& c = calls[j];
    if (c.m == 0 || c.n == 0) continue;
    const int64_t n = c.blocks();
    for (int64_t i = 0; i < n; ++i) blocks[static_cast<std::size_t>(total++)] = Block{&c, i, n};
  }
  // Pack item p: chunk p % kPackChunks of operand p / kPackChunks.
  const auto packs = static_cast<int64_t>(to_pack != nullptr ? 2 * to_pack->size() : 0) * kPackChunks;
  const auto pack = [&](int64_t p) {
    pack_operand(*to_pack, static_cast<std::size_t>(p / kPackChunks), p % kPackChunks, *packed);
  };
  // Work item i: a GEMM block below `total`, then the column sums' blocks.
  const int64_t items = total + (sums != nullptr ? sums->blocks() : 0);
  const auto run = [&](int64_t i) {
    if (i < total) blocks[i].call->run_block(blocks[i].index, blocks[i].count);
    else sums->run_block(i - total);
  };
  if (items <= 1 || on_one_thread()) {
    for (int64_t p = 0; p < packs; ++p) pack(p);
    for (int64_t i = 0; i < items; ++i) run(i);
    return;
  }
  int cpus[kMaxTrackedThreads];
  std::fill(cpus, cpus + kMaxTrackedThreads, -1);
#pragma omp parallel
  {
    if (omp_get_thread_num() < kMaxTrackedThreads) cpus[omp_get_thread_num()] = current_cpu();
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < packs; ++p) pack(p);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < items; ++i) run(i);
  }
  spread_if_shared(cpus, std::min(omp_get_max_threads(), kMaxTrackedThreads));
}

// `sums`, if given, runs in the same region (a Linear's bias gradient).
template <class T>
void parallel_gemms(std::initializer_list<GemmCall<T>> calls, const ColumnSums<T>* sums = nullptr) {
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_precision() == GemmPrecision::bf16) {
      const PackedOperands packed = pack_operands(calls);
      run_calls(packed.calls.data(), packed.count, &calls, &packed, sums);
      return;
    }
  }
  run_calls<T, T>(calls.begin(), calls.size(), nullptr, nullptr, sums);
}

}  // namespace headlab::core::detail

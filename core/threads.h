// One setting governs OpenMP and OpenBLAS together (Debian's OpenMP build of
// OpenBLAS shares our OpenMP pool, so the two never oversubscribe the cores).
#pragma once

namespace headlab::core {

// Sets the threads for our kernels and for BLAS. n <= 0 means all cores.
void set_num_threads(int n);
int num_threads();
int hardware_threads();

// Below this many elements a kernel runs on one thread: forking costs more.
constexpr long kParallelGrain = 1 << 15;
// Below this many multiply-adds a batch of small GEMMs runs on one thread.
constexpr long kParallelGemmWork = 1 << 18;
// One GEMM is split into a block per this many multiply-adds (detail::parallel_gemm).
constexpr long kGemmBlockWork = 1 << 20;

}  // namespace headlab::core

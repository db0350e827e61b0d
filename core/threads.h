// One setting governs OpenMP and OpenBLAS together (Debian's OpenMP build of
// OpenBLAS shares our OpenMP pool, so the two never oversubscribe the cores).
#pragma once

namespace headlab::core {

// Sets the threads for our kernels and for BLAS. n <= 0 means all cores.
// With n > 1 it also moves OpenMP's worker threads off CPUs another thread
// of the team already occupies (see threads.cpp: a worker left on the
// master's CPU makes every parallel region cost a scheduler tick).
void set_num_threads(int n);
int num_threads();
int hardware_threads();

// --threads 0: the thread count for a training step of `flops_per_step`
// FLOPs: 1 below kAutoThreadsFlops, else one per core. A smaller step gains
// 1.3-2x from a second thread on a quiet machine (its slices side by side,
// train/step_lanes.h) and loses about 2x when anything else runs on the
// cores: the step's remaining parallel regions (the lanes' join, clipping,
// AdamW) each wait for a descheduled thread, a cost per region, not per
// FLOP. Measured on the presets (docs/performance.md, "Threads that fit the
// work"): the demo and tiny 2.2x slower under load, small 1.8x (before the
// lanes 3-4x), medium 1.1x.
constexpr double kAutoThreadsFlops = 1e10;
int threads_for_work(double flops_per_step);

// Below this many elements a kernel runs on one thread: forking costs more.
// A fork and join costs ~1-3 us here; at 2^14 floats (~5 us of a simple
// kernel) splitting starts to pay: the tiny preset's 2-thread step went from
// 1.61 to 1.49 ms against 2^16, the others unchanged.
constexpr long kParallelGrain = 1 << 14;
// Below this many multiply-adds a batch of small GEMMs runs on one thread.
constexpr long kParallelGemmWork = 1 << 18;
// One GEMM is split into a block per this many multiply-adds, into at most
// kMaxGemmBlocks blocks (detail::GemmCall).
constexpr long kGemmBlockWork = 1 << 20;
constexpr long kMaxGemmBlocks = 4;

namespace detail {

// Healing the placement described in threads.cpp, for the hot parallel
// regions: inside the region each thread stores current_cpu() at
// cpus[omp_get_thread_num()] (for thread numbers < kMaxTrackedThreads); after
// it, spread_if_shared(cpus, n) moves workers off a CPU two of them shared.
constexpr int kMaxTrackedThreads = 64;
int current_cpu();  // -1 where unknown
void spread_if_shared(const int* cpus, int n);

}  // namespace detail

}  // namespace headlab::core

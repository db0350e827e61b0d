#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

namespace headlab::core {

namespace {

// Moves OpenMP's worker threads off CPUs that another thread of the team
// already runs on, when a free CPU is allowed.
//
// Why: Linux may start (or wake) the worker on the master's CPU and leave it
// there while the other CPU idles. Then every parallel region costs a
// scheduler tick or two (4-8 ms on these 2-CPU VMs) instead of ~2 us: at the
// join barrier the master spins on the CPU the worker needs, until its time
// slice ends. A region that keeps both threads busy for ~20 ms lets the load
// balancer separate them, which is why OpenBLAS looked slow "until the
// process ran one large GEMM". Measured on 512x64x64 sgemm split in two:
// co-located, 8000 us median per call; separated, 30 us. Other load on the
// machine can put the two together again later, so the GEMM regions check
// the placement each time and heal it (detail::spread_if_shared).
//
// Each moved worker pins itself to a free CPU for an instant (the kernel
// migrates it at once) and then restores its original mask, so nothing stays
// pinned and the scheduler remains free to move threads later. An
// OMP_PROC_BIND placement chosen by the user is left alone.
void spread_team() {
#ifdef __linux__
  if (omp_get_proc_bind() != omp_proc_bind_false) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int n = omp_get_max_threads();
  if (n < 2 || n > CPU_COUNT(&allowed)) return;
  std::vector<int> cpu(static_cast<std::size_t>(n), -1), target(static_cast<std::size_t>(n), -1);
#pragma omp parallel num_threads(n)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    cpu[t] = sched_getcpu();
#pragma omp barrier
#pragma omp single
    {
      // Keep the first thread on each CPU; give each later one a free CPU.
      std::vector<bool> used(CPU_SETSIZE, false);
      for (std::size_t i = 0; i < cpu.size(); ++i) {
        if (cpu[i] < 0 || cpu[i] >= CPU_SETSIZE) break;  // no sched_getcpu: leave the rest as they are
        if (!used[static_cast<std::size_t>(cpu[i])]) {
          used[static_cast<std::size_t>(cpu[i])] = true;
          continue;
        }
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (CPU_ISSET(c, &allowed) && !used[static_cast<std::size_t>(c)]) {
            used[static_cast<std::size_t>(c)] = true;
            target[i] = c;
            break;
          }
        }
      }
    }
    if (target[t] >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(target[t], &one);
      if (sched_setaffinity(0, sizeof one, &one) == 0) sched_setaffinity(0, sizeof allowed, &allowed);
    }
  }
#endif
}

}  // namespace

namespace detail {

int current_cpu() {
#ifdef __linux__
  return sched_getcpu();
#else
  return -1;
#endif
}

void spread_if_shared(const int* cpus, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j)
      if (cpus[i] >= 0 && cpus[i] == cpus[j]) {
        spread_team();
        return;
      }
}

}  // namespace detail

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int threads_for_work(double flops_per_step) {
  return flops_per_step < kAutoThreadsFlops ? 1 : hardware_threads();
}

void set_num_threads(int n) {
  if (n <= 0) n = hardware_threads();
  omp_set_num_threads(n);
  // BLAS is only ever called single-threaded (core/blas.h); this keeps
  // OpenBLAS's own setting in line for any other caller in the process.
  openblas_set_num_threads(n);
  if (n > 1) spread_team();
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace headlab::core

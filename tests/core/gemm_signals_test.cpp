// A signal handled during a oneDNN product must find the thread on its own
// stack: oneDNN 2.x's JIT GEMM kernels point the stack pointer into the heap
// while they run, and a handler's frame written there corrupts malloc's
// bookkeeping (a run stopped by SIGTERM then aborted in free). A timer fires
// every 50 us through five hundred products of a training step's shapes;
// the handler records any interrupted stack pointer outside the stack.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <ucontext.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <vector>

#include "core/gemm.h"

namespace headlab::core {
namespace {

uintptr_t g_stack_low = 0, g_stack_high = 0;
std::atomic<int64_t> g_handled{0}, g_off_stack{0};

extern "C" void note_stack_pointer(int, siginfo_t*, void* context) {
  const auto rsp = static_cast<uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP]);
  ++g_handled;
  if (rsp < g_stack_low || rsp > g_stack_high) ++g_off_stack;
}

TEST(GemmSignals, AHandlerNeverRunsOnTheHeapDuringAOneDnnProduct) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
  void* base = nullptr;
  std::size_t size = 0;
  ASSERT_EQ(pthread_attr_getstack(&attr, &base, &size), 0);
  pthread_attr_destroy(&attr);
  g_stack_low = reinterpret_cast<uintptr_t>(base);
  g_stack_high = g_stack_low + size;

  struct sigaction action {}, previous {};
  action.sa_sigaction = note_stack_pointer;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGALRM, &action, &previous), 0);
  sigset_t mask_before, mask_after;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_before);
  // A timer that signals this thread only (the process's OpenMP threads have
  // stacks of their own), every 50 us.
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGALRM;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));  // SIGEV_THREAD_ID: this thread
  timer_t timer{};
  ASSERT_EQ(timer_create(CLOCK_MONOTONIC, &event, &timer), 0);
  const itimerspec every_50us{{0, 50000}, {0, 50000}};
  ASSERT_EQ(timer_settime(timer, 0, &every_50us, nullptr), 0);

  // [rows, features] activations and weights of a small model's linear layers.
  const int64_t shapes[][3] = {{384, 64, 256}, {64, 256, 384}, {256, 64, 384}, {384, 256, 64}, {384, 8, 64}};
  const std::vector<float> a(384 * 384, 0.5f), b(384 * 384, 0.25f);
  std::vector<float> c(384 * 384);
  bool right = true;
  for (int repeat = 0; repeat < 25; ++repeat)
    for (const auto& s : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const int64_t m = s[0], n = s[1], k = s[2];
          detail::onednn_gemm(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(), tb ? k : n, c.data(), n, 1.0f, 0.0f);
          right = right && c[0] == 0.125f * static_cast<float>(k) && c[static_cast<std::size_t>(m * n - 1)] == c[0];
        }

  timer_delete(timer);
  pthread_sigmask(SIG_SETMASK, nullptr, &mask_after);
  sigaction(SIGALRM, &previous, nullptr);
  EXPECT_TRUE(right);
  EXPECT_GT(g_handled.load(), 0) << "the timer never fired: the test tested nothing";
  EXPECT_EQ(g_off_stack.load(), 0) << "of " << g_handled.load() << " signals";
  EXPECT_EQ(sigismember(&mask_after, SIGALRM), sigismember(&mask_before, SIGALRM)) << "the mask is restored";
}

}  // namespace
}  // namespace headlab::core

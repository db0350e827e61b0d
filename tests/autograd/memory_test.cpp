// The graph is released after every backward: memory stays flat over many steps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "autograd/ops.h"
#include "autograd/variable.h"
#include "core/ops.h"
#include "core/random.h"

namespace headlab::autograd {
namespace {

// Resident set size in pages, from /proc/self/statm (0 if unavailable).
long resident_pages() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

TEST(Memory, TenThousandTrainingStepsLeaveNodesAndMemoryFlat) {
  core::Generator gen(3);
  Variable w(gen.normal({16, 16}, 0.0, 0.3, DType::f32), true);
  Variable b(Tensor::zeros({16}, DType::f32), true);
  const Tensor x = gen.normal({8, 16}, 0.0, 1.0, DType::f32);
  const std::vector<int32_t> targets = {0, 3, 5, -1, 7, 2, 15, 9};

  auto step = [&] {
    Variable h = gelu(matmul(Variable(x), transpose(w, 0, 1)) + b);
    Variable loss = cross_entropy(layer_norm(h, {}, {}), targets);
    loss.backward();
    NoGradGuard no_grad;  // a plain SGD update, in place
    w.mutable_value().copy_(core::sub(w.value(), core::mul(w.grad(), 0.01)));
    w.zero_grad();
    b.zero_grad();
  };
  for (int i = 0; i < 100; ++i) step();  // warm up the allocator
  const int64_t nodes_before = live_node_count();
  const long pages_before = resident_pages();
  for (int i = 0; i < 10000; ++i) step();
  EXPECT_EQ(live_node_count(), nodes_before);
#if !defined(__SANITIZE_ADDRESS__)  // ASan quarantines freed memory, so RSS grows regardless
  // A leak of even one small graph per step (> 10 KB) would add > 100 MB.
  const long grown_kb = (resident_pages() - pages_before) * (sysconf(_SC_PAGESIZE) / 1024);
  EXPECT_LT(grown_kb, 8 * 1024) << "resident memory grew by " << grown_kb << " KB";
#else
  (void)pages_before;
#endif
}

}  // namespace
}  // namespace headlab::autograd

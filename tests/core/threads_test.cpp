// --threads 0's rule (core::threads_for_work): one thread for a toy step,
// one per core from kAutoThreadsFlops up.
#include "core/threads.h"

#include <gtest/gtest.h>

namespace headlab::core {
namespace {

TEST(ThreadsForWork, OneThreadBelowTheThresholdAndEveryCoreFromIt) {
  EXPECT_EQ(threads_for_work(0.0), 1);
  EXPECT_EQ(threads_for_work(kAutoThreadsFlops * 0.99), 1);
  EXPECT_EQ(threads_for_work(kAutoThreadsFlops), hardware_threads());
  EXPECT_EQ(threads_for_work(kAutoThreadsFlops * 1e3), hardware_threads());
}

}  // namespace
}  // namespace headlab::core

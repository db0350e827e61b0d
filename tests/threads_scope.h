// The process's thread count (core::set_num_threads) for one scope, for
// tests that compare a result at one thread count against another.
#pragma once

#include "core/threads.h"

namespace headlab::test {

class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : before_(core::num_threads()) { core::set_num_threads(n); }
  ~ThreadsScope() { core::set_num_threads(before_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int before_;
};

}  // namespace headlab::test

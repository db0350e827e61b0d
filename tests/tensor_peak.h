// A bound on the tensor memory a piece of code holds at once, from the
// tensors' buffer cache (core/tensor.h): emptied before, the cache holds
// afterwards each buffer size as many times as buffers of that size were
// alive at once during the code, so its bytes bound the code's peak of tensor
// memory from above (and include a tensor allocated and freed in it). Under
// AddressSanitizer the cache is off: a test skips (HEADLAB_SKIP_WITHOUT_BUFFER_CACHE).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "core/tensor.h"

namespace headlab::test {

template <class F>
std::size_t peak_tensor_bytes(F&& run) {
  core::set_buffer_cache_limit(0);
  core::set_buffer_cache_limit(std::size_t{1} << 30);  // the default again
  run();
  return core::buffer_cache_bytes();
}

}  // namespace headlab::test

#if defined(__SANITIZE_ADDRESS__)
#define HEADLAB_SKIP_WITHOUT_BUFFER_CACHE() GTEST_SKIP() << "the buffer cache is off under AddressSanitizer"
#else
#define HEADLAB_SKIP_WITHOUT_BUFFER_CACHE() (void)0
#endif

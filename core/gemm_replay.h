// A step's GEMM time inside the step against the same calls run alone.
//
// While `gemm_time_inside_and_alone` runs a piece of work, every float32
// product the work calls through core/gemm.h (detail::gemm, detail::
// batched_gemm, and the already-rounded bf16 products of
// detail::packed_bf16_gemm) is timed where it runs and its arguments are
// recorded. Afterwards each recorded call is replayed alone, on this thread,
// on fresh operands of the same shapes, layouts and precision, warm (the
// best of `repeats` runs). Inside over alone says what the rest of the step
// costs the products: operands evicted from cache by the kernels between
// them, the other thread's traffic. `headlab bench --gemm-alone` prints it.
#pragma once

#include <functional>
#include <string>
#include <vector>


namespace headlab::core {

// The calls of one shape: precision, batch, transposes, m x n x k and beta
// ("bf16 16 x NT 64x128x32", "f32 1 x TN 256x256x2048 beta 1").
struct GemmShapeTimes {
  std::string shape;
  long calls = 0;
  double inside_ms = 0, alone_ms = 0;
};

struct GemmTimes {
  long calls = 0;         // float32 products the work ran
  double inside_ms = 0;   // their time inside the work, summed over the threads that ran them
  double alone_ms = 0;    // the same calls replayed alone, best of `repeats` each, summed
  // The same by shape, the largest inside - alone first: which products the
  // rest of the work slows down.
  std::vector<GemmShapeTimes> shapes;
};

GemmTimes gemm_time_inside_and_alone(const std::function<void()>& work, int repeats = 5);

}  // namespace headlab::core

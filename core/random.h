// A seeded random generator whose streams never depend on the thread count.
//
// xoshiro256** seeded by splitmix64; normals by Box-Muller. Both algorithms
// are fully specified here (unlike std:: distributions, which differ between
// standard libraries), so a seed gives the same numbers everywhere.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace headlab::core {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  double uniform();                         // [0, 1)
  double uniform(double low, double high);  // [low, high)
  double normal(double mean = 0.0, double stddev = 1.0);
  int64_t integer(int64_t low, int64_t high);  // [low, high), unbiased

  Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::f32);
  Tensor normal(const Shape& shape, double mean, double stddev, DType dtype = DType::f32);

  // The whole state, for checkpoints: 4 words of xoshiro plus the cached normal.
  using State = std::array<uint64_t, 6>;
  State state() const;
  void set_state(const State& state);

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace headlab::core

#include "core/random.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <string>

namespace headlab::core {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Generator::reseed(uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
  has_spare_ = false;
  spare_ = 0.0;
}

uint64_t Generator::next_u64() {  // xoshiro256**
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::uniform(double low, double high) { return low + (high - low) * uniform(); }

double Generator::normal(double mean, double stddev) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + stddev * spare_;
  }
  // Box-Muller; 1 - u keeps the log's argument in (0, 1].
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return mean + stddev * r * std::cos(theta);
}

int64_t Generator::integer(int64_t low, int64_t high) {
  if (high <= low)
    throw std::invalid_argument("Generator::integer: empty range [" + std::to_string(low) + ", " +
                                std::to_string(high) + ")");
  const auto range = static_cast<uint64_t>(high - low);
  // Rejection sampling: drop the top partial block so every value is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x = next_u64();
  while (x >= limit) x = next_u64();
  return low + static_cast<int64_t>(x % range);
}

Tensor Generator::uniform(const Shape& shape, double low, double high, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(uniform(low, high));
  });
  return t;
}

Tensor Generator::normal(const Shape& shape, double mean, double stddev, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(normal(mean, stddev));
  });
  return t;
}

Generator::State Generator::state() const {
  uint64_t spare_bits = 0;
  static_assert(sizeof(spare_bits) == sizeof(spare_));
  std::memcpy(&spare_bits, &spare_, sizeof(spare_));
  return {s_[0], s_[1], s_[2], s_[3], has_spare_ ? 1u : 0u, spare_bits};
}

void Generator::set_state(const State& state) {
  for (std::size_t i = 0; i < 4; ++i) s_[i] = state[i];
  if (s_[0] == 0 && s_[1] == 0 && s_[2] == 0 && s_[3] == 0)
    throw std::invalid_argument("Generator::set_state: the all-zero state is invalid");
  has_spare_ = state[4] != 0;
  std::memcpy(&spare_, &state[5], sizeof(spare_));
}

}  // namespace headlab::core

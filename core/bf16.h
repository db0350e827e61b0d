// bfloat16: float32's sign, exponent and top 7 mantissa bits, stored as the
// upper half of the float's bits. Rounding to it keeps float32's range and
// 8 significant bits (relative error at most 2^-9).
#pragma once

#include <cstdint>
#include <cstring>

namespace headlab::core {

using bf16_t = uint16_t;

// Round to nearest, ties to even, exactly as AVX512_BF16's vcvtneps2bf16
// does, which pack_bf16 runs where the CPU has it: a NaN stays a (quiet)
// NaN instead of rounding into infinity, and a denormal float becomes a
// zero of its sign. Branch-free, so a loop of it vectorizes.
inline bf16_t to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  const bool denormal = (u & 0x7F800000u) == 0;
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<bf16_t>(nan ? (u >> 16) | 0x40u : denormal ? (u >> 16) & 0x8000u : rounded);
}

inline float from_bf16(bf16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x = 0;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// dst [rows, cols] dense (leading dimension cols) = to_bf16 of src [rows,
// cols] with leading dimension ld >= cols.
void pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, bf16_t* dst);

}  // namespace headlab::core

// The fused attention forward without a backward (core/attention_kernels.h,
// `backward` false): no precision keeps the probabilities, and the output
// keeps every bit of the forward that keeps them -- each block's
// probabilities computed in a per-thread buffer instead of P's rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/attention_kernels.h"
#include "core/gemm.h"
#include "tests/core/gemm_test_util.h"

namespace headlab::core {
namespace attention_kernels_test {

bool identical_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<std::size_t>(ac.numel()) * dtype_size(a.dtype())) == 0;
}

// q, k and v [B, T, h dk] of `dtype`, row 0's key 3 and row 1's key 7 padded
// when `padded`, heads gated 0.5 and 0 when `gated` (two heads).
void check_without_backward(int64_t B, int64_t T, int64_t h, int64_t dk, bool causal, bool padded, bool gated,
                            DType dtype) {
  SCOPED_TRACE("B " + std::to_string(B) + ", T " + std::to_string(T) + ", h " + std::to_string(h) +
               (causal ? ", causal" : ", bidirectional") + (padded ? ", padded" : "") + (gated ? ", gated" : "") +
               ", " + to_string(dtype));
  const auto seq = [&](uint64_t seed) {
    const std::vector<float> v = test::random_floats(B * T * h * dk, seed);
    return Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {B, T, h * dk}, dtype);
  };
  const Tensor q = seq(1), k = seq(2), v = seq(3);
  std::vector<double> real(static_cast<std::size_t>(B * T), 1.0);
  if (padded) real[3] = real[static_cast<std::size_t>(T) + 7] = 0.0;
  const Tensor mask = padded ? Tensor::from_vector(real, {B, T}, dtype) : Tensor();
  const Tensor gates = gated ? Tensor::from_vector({0.5, 0.0}, {2}, dtype) : Tensor();
  const AttentionShape shape{h, causal, 1.0 / std::sqrt(static_cast<double>(dk))};
  const AttentionForward kept = attention_forward(q, k, v, shape, mask, gates);
  const AttentionForward alone = attention_forward(q, k, v, shape, mask, gates, false, false, /*backward=*/false);
  ASSERT_TRUE(kept.probs.defined());
  EXPECT_FALSE(alone.probs.defined()) << "nothing reads them";
  EXPECT_TRUE(identical_bits(alone.out, kept.out));
  // With a backward to come, this precision keeps them whatever is asked.
  EXPECT_TRUE(attention_forward(q, k, v, shape, mask, gates, false).probs.defined());
  // Asked for (a probe's), they are kept without a backward too, the same bits.
  const AttentionForward asked = attention_forward(q, k, v, shape, mask, gates, true, false, false);
  ASSERT_TRUE(asked.probs.defined());
  EXPECT_TRUE(identical_bits(asked.probs, kept.probs));
  EXPECT_TRUE(identical_bits(asked.out, kept.out));
}

TEST(AttentionKernels, WithoutABackwardNoProbabilitiesAreKeptAndTheOutputKeepsEveryBit) {
  const test::Scope f32(gemm_backend(), GemmPrecision::f32);
  for (const DType dtype : {DType::f32, DType::f64}) {
    // One block; two causal chunks (70 rows); blocks of one sequence (12
    // sequences of 8 heads x 128 tokens: more than 8 blocks), each starting
    // at its own rows of the per-thread buffer's P; padded; gated.
    check_without_backward(1, 9, 2, 4, true, false, false, dtype);
    check_without_backward(3, 70, 2, 8, true, false, false, dtype);
    check_without_backward(12, 128, 8, 4, true, false, false, dtype);
    check_without_backward(2, 20, 4, 16, false, true, false, dtype);
    check_without_backward(2, 33, 2, 16, true, false, true, dtype);
  }
}

}  // namespace attention_kernels_test
}  // namespace headlab::core

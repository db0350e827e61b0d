// Operands rounded once per scope (core/bf16_operands.h): a Linear's
// products inside a Bf16Operands scope give exactly the bits of the packing
// path, reuse the rounded input and weight, and never use a copy whose
// float32 source changed (a new scope, forget_bf16_operands) or whose
// memory could have been reused (its storage was freed).
#include "core/bf16_operands.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/attention_kernels.h"
#include "core/gemm.h"
#include "core/nn_kernels.h"
#include "core/nn_kernels_gelu.h"
#include "core/ops.h"
#include "core/random.h"
#include "core/tensor.h"

namespace headlab::core {
namespace {

// bf16 products on the selected backend for the test's duration.
class Bf16Products {
 public:
  Bf16Products() : saved_(gemm_precision()) { set_gemm_precision(GemmPrecision::bf16); }
  ~Bf16Products() { set_gemm_precision(saved_); }
  Bf16Products(const Bf16Products&) = delete;
  Bf16Products& operator=(const Bf16Products&) = delete;

 private:
  GemmPrecision saved_;
};

bool identical_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<std::size_t>(ac.numel()) * sizeof(float)) == 0;
}

// x [N, in] and weight [out, in] as a Linear stores them: how its products read them.
detail::StoredOperand rows_of(const Tensor& t) { return {t.data<float>(), t.size(0), t.size(1), t.size(1)}; }

#define SKIP_WITHOUT_BF16_UNITS_HERE() \
  if (!cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)"

struct LinearCase {
  Tensor x, w, b, g;
  explicit LinearCase(uint64_t seed) {
    Generator gen(seed);
    x = gen.normal({37, 24}, 0.0, 1.0, DType::f32);
    w = gen.normal({20, 24}, 0.0, 1.0, DType::f32);
    b = gen.normal({20}, 0.0, 1.0, DType::f32);
    g = gen.normal({37, 20}, 0.0, 1.0, DType::f32);
  }
};

TEST(Bf16Operands, ALinearsProductsInAScopeGiveThePackingPathsBits) {
  SKIP_WITHOUT_BF16_UNITS_HERE();
  const Bf16Products bf16;
  const LinearCase c(5);
  const Tensor y0 = linear(c.x, c.w, c.b);
  const LinearGrads d0 = linear_backward(c.g, c.x, c.w, true, true);
  EXPECT_EQ(detail::find_bf16_operand(rows_of(c.x)), nullptr);  // no scope: nothing kept
  {
    const Bf16Operands scope;
    const Tensor y1 = linear(c.x, c.w, c.b);
    // The forward kept both operands for the backward.
    EXPECT_NE(detail::find_bf16_operand(rows_of(c.x)), nullptr);
    EXPECT_NE(detail::find_bf16_operand(rows_of(c.w)), nullptr);
    const LinearGrads d1 = linear_backward(c.g, c.x, c.w, true, true);
    EXPECT_TRUE(identical_bits(y0, y1));
    EXPECT_TRUE(identical_bits(d0.dx, d1.dx));
    EXPECT_TRUE(identical_bits(d0.dweight, d1.dweight));
    // A second forward of the same input and weight: the same bits again.
    EXPECT_TRUE(identical_bits(y0, linear(c.x, c.w, c.b)));
  }
  EXPECT_EQ(detail::find_bf16_operand(rows_of(c.x)), nullptr);  // closed: dropped
}

// The kernels whose outputs a Linear reads next write the rounded copy
// themselves: inside a scope, in bf16, LayerNorm's, the residual add with
// LayerNorm's, the fused bias + GELU's and attention's (gated, causal, two
// chunks) outputs each have a kept copy with the packing path's bits, which
// the Linear then takes (the same bits as its own rounding). Not in f32,
// and not outside a scope.
TEST(Bf16Operands, TheKernelsBeforeALinearWriteTheCopyItTakes) {
  SKIP_WITHOUT_BF16_UNITS_HERE();
  Generator gen(11);
  const Tensor x = gen.normal({37, 24}, 0.0, 1.0, DType::f32), a = gen.normal({37, 24}, 0.0, 1.0, DType::f32);
  const Tensor w = gen.normal({24}, 1.0, 0.1, DType::f32), b = gen.normal({24}, 0.0, 0.1, DType::f32);
  const Tensor h = gen.normal({37, 24}, 0.0, 1.0, DType::f32), lw = gen.normal({20, 24}, 0.0, 1.0, DType::f32);
  const Tensor q = gen.normal({2, 70, 24}, 0.0, 1.0, DType::f32), k = gen.normal({2, 70, 24}, 0.0, 1.0, DType::f32);
  const Tensor v = gen.normal({2, 70, 24}, 0.0, 1.0, DType::f32);
  const Tensor gates = Tensor::from_vector({1.0, 0.5, 2.0}, {3}, DType::f32);
  const auto outputs = [&] {
    return std::vector<Tensor>{
        layer_norm_forward(x, w, b, 1e-5).y, add_layer_norm_forward(x, a, w, b, 1e-5).norm.y,
        bias_gelu_forward(h.clone(), b, true).y,
        attention_forward(q, k, v, {3, true, 0.35}, Tensor(), gates).out.reshape({140, 24})};
  };
  const auto rounded = [](const Tensor& t) {
    std::vector<bf16_t> r(static_cast<std::size_t>(t.numel()));
    pack_bf16(t.data<float>(), t.size(0), t.size(1), t.size(1), r.data());
    return r;
  };
  {
    const F32Gemms f32;  // f32 products: no copies
    const Bf16Operands scope;
    for (const Tensor& y : outputs()) EXPECT_EQ(detail::find_bf16_operand(rows_of(y)), nullptr);
  }
  const Bf16Products bf16;
  for (const Tensor& y : outputs()) EXPECT_EQ(detail::find_bf16_operand(rows_of(y)), nullptr);  // no scope
  const std::vector<Tensor> plain = outputs();
  const Bf16Operands scope;
  const std::vector<Tensor> produced = outputs();
  for (std::size_t i = 0; i < produced.size(); ++i) {
    SCOPED_TRACE(i);
    const Tensor& y = produced[i];
    EXPECT_TRUE(identical_bits(y, plain[i]));
    const bf16_t* kept = detail::find_bf16_operand(rows_of(y));
    ASSERT_NE(kept, nullptr);
    const std::vector<bf16_t> want = rounded(y);
    EXPECT_EQ(std::memcmp(kept, want.data(), want.size() * sizeof(bf16_t)), 0);
    EXPECT_TRUE(identical_bits(linear(y, lw, Tensor()), linear(plain[i], lw, Tensor())));
  }
}

// What the scope's contract rests on, shown both ways: inside one scope a
// source changed in place is not seen (so only the training step, where
// nothing writes a saved value, opens one), and forgetting, or a new
// scope, rounds the changed source afresh.
TEST(Bf16Operands, AWeightChangedInPlaceIsRoundedAfreshAfterForgetOrANewScope) {
  SKIP_WITHOUT_BF16_UNITS_HERE();
  const Bf16Products bf16;
  const LinearCase c(6);
  const Tensor before = linear(c.x, c.w, c.b);
  const Tensor changed = c.w.clone();
  changed.data<float>()[3] += 1.0f;  // the weight as the optimizer would leave it
  const Tensor after = linear(c.x, changed, c.b);
  ASSERT_FALSE(identical_bits(before, after));
  Tensor w = c.w.clone();
  {
    const Bf16Operands scope;
    EXPECT_TRUE(identical_bits(linear(c.x, w, c.b), before));
    w.data<float>()[3] += 1.0f;
    EXPECT_TRUE(identical_bits(linear(c.x, w, c.b), before));  // the kept copy: stale, by contract
    forget_bf16_operands();                                     // what every hook visit does
    EXPECT_TRUE(identical_bits(linear(c.x, w, c.b), after));
    w.data<float>()[3] -= 1.0f;
  }
  {
    const Bf16Operands next_step;
    EXPECT_TRUE(identical_bits(linear(c.x, w, c.b), before));
  }
}

// A rounded input whose tensor is freed inside the scope stands for nothing
// after: its copy is no longer found, so a new tensor that lands at its
// address (as the allocator may place it) is rounded afresh.
TEST(Bf16Operands, AFreedInputsCopyIsNotTakenForANewTensorAtItsAddress) {
  SKIP_WITHOUT_BF16_UNITS_HERE();
  const Bf16Products bf16;
  const LinearCase c(7);
  Generator gen(8);
  std::vector<Tensor> inputs, outputs;
  {
    const Bf16Operands scope;
    detail::StoredOperand first;
    {
      const Tensor x1 = gen.normal({37, 24}, 0.0, 1.0, DType::f32);
      first = rows_of(x1);
      (void)linear(x1, c.w, c.b);
      EXPECT_NE(detail::find_bf16_operand(first), nullptr);
    }  // x1's storage is gone
    EXPECT_EQ(detail::find_bf16_operand(first), nullptr);
    for (int i = 0; i < 4; ++i) {
      inputs.push_back(gen.normal({37, 24}, 0.0, 1.0, DType::f32));
      outputs.push_back(linear(inputs.back(), c.w, c.b));
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)  // the reference: no scope, every operand rounded afresh
    EXPECT_TRUE(identical_bits(outputs[i], linear(inputs[i], c.w, c.b))) << i;
}

}  // namespace
}  // namespace headlab::core

// bf16 mixed precision inside a training step's Bf16Operands scope: a Linear
// holds its input's rounded copy for its backward's dW = g^T x, so the
// float32 outputs of LayerNorm, GELU and attention, which only Linears read,
// are released after the forward (core/bf16_operands.h). The gradients keep
// the bits of the path that keeps every value (no scope: each product rounds
// its operands afresh), and an input someone else still holds is read
// as it is then, as in float32.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "autograd/variable.h"
#include "core/bf16.h"
#include "core/bf16_operands.h"
#include "core/gemm.h"
#include "core/nn_kernels_gelu.h"
#include "core/ops.h"
#include "core/random.h"
#include "tests/precision.h"

namespace headlab::autograd {
namespace {

bool identical_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), static_cast<std::size_t>(ac.numel()) * sizeof(float)) == 0;
}

// x [2, 40, 24] -> LayerNorm -> attention (q, k, v Linears, 3 heads,
// causal) -> output Linear -> LayerNorm -> Linear + GELU -> Linear, the
// transformer block's Linear inputs, and a weighted sum of the result.
struct Block {
  std::vector<Variable> params;
  Variable x;
  Tensor weights;
  explicit Block(uint64_t seed) {
    core::Generator gen(seed);
    const auto param = [&](const core::Shape& shape, double mean, double sd) {
      params.emplace_back(gen.normal(shape, mean, sd, DType::f32), true);
    };
    param({24}, 1.0, 0.1);  // 0, 1: LayerNorm weight and bias
    param({24}, 0.0, 0.1);
    for (int i = 0; i < 4; ++i) {  // 2..9: q, k, v, output Linears (weight, bias)
      param({24, 24}, 0.0, 0.3);
      param({24}, 0.0, 0.1);
    }
    param({48, 24}, 0.0, 0.3);  // 10, 11: the GELU Linear
    param({48}, 0.0, 0.1);
    param({24, 48}, 0.0, 0.3);  // 12, 13: the last Linear
    param({24}, 0.0, 0.1);
    x = Variable(gen.normal({2, 40, 24}, 0.0, 1.0, DType::f32), true);
    weights = gen.normal({2, 40, 24}, 0.0, 1.0, DType::f32);
  }
  const Variable& p(int i) const { return params[static_cast<std::size_t>(i)]; }

  // Every gradient (x's and the parameters') after one forward and backward;
  // `held` gets the Linears' inputs (LayerNorm, attention, LayerNorm, GELU
  // outputs) as the nodes that read them saw them, after the forward.
  std::vector<Tensor> grads(std::vector<Variable>* held, bool keep_gelu_output = false) {
    for (Variable& v : params) v.zero_grad();
    x.zero_grad();
    Variable kept;
    Variable out;
    {
      const Variable n1 = layer_norm(x, p(0), p(1));
      const Variable q = linear(n1, p(2), p(3)), k = linear(n1, p(4), p(5)), v = linear(n1, p(6), p(7));
      const Variable attended = linear(attention(q, k, v, 3, true, 0.2), p(8), p(9));
      const Variable n2 = layer_norm(attended, p(0), p(1));
      const Variable hidden = linear_gelu(n2, p(10), p(11));
      if (keep_gelu_output) kept = hidden;
      out = linear(hidden, p(12), p(13));
    }
    if (held != nullptr) {
      // out = linear(hidden): its input 0 is hidden, whose input 0 is n2, ...
      const Variable& hidden = out.node()->inputs[0];
      const Variable& n2 = hidden.node()->inputs[0];
      const Variable& attended = n2.node()->inputs[0];
      const Variable& attention_out = attended.node()->inputs[0];
      const Variable& n1 = attention_out.node()->inputs[0].node()->inputs[0];
      *held = {n1, attention_out, n2, hidden};
    }
    sum(mul(out, Variable(weights))).backward();
    std::vector<Tensor> g{x.grad()};
    for (const Variable& v : params) g.push_back(v.grad());
    return g;
  }
};

void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(identical_bits(a[i], b[i])) << "gradient " << i;
}

TEST(Bf16Release, ALinearsInputIsReleasedAfterTheForwardAndTheGradientsKeepTheirBits) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  Block block(21);
  std::vector<Variable> held;
  {
    const test::PrecisionScope f32(core::GemmPrecision::f32);
    const core::Bf16Operands scope;  // f32 products: nothing rounded, nothing released
    (void)block.grads(&held);
    for (const Variable& v : held) EXPECT_FALSE(v.node()->released()) << v.op();
  }
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  const std::vector<Tensor> reference = block.grads(&held);  // no scope: every value kept
  for (const Variable& v : held) EXPECT_FALSE(v.node()->released()) << v.op();
  {
    const core::Bf16Operands scope;
    expect_same_bits(block.grads(&held), reference);
    for (const Variable& v : held) EXPECT_TRUE(v.node()->released()) << v.op();
  }
  {
    // The GELU output held by someone else: kept, and its Linear reads it.
    const core::Bf16Operands scope;
    expect_same_bits(block.grads(&held, true), reference);
    EXPECT_FALSE(held[3].node()->released());
    EXPECT_TRUE(held[2].node()->released());
  }
}

// The GELU Linear's backward in bf16 makes dh = g * slope only rounded
// (core::gelu_backward_rounded) for its products: its gradients have the
// bits of the float path (dh stored in float32, rounded by the products),
// with the scope (x from its held copy) and without (x as a tensor).
TEST(Bf16Release, TheGeluLinearsGradientsFromItsRoundedOutputGradientAreTheFloatPathsBits) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  core::Generator gen(23);
  const Tensor x = gen.normal({75, 24}, 0.0, 1.0, DType::f32), w = gen.normal({300, 24}, 0.0, 0.3, DType::f32);
  const Tensor b = gen.normal({300}, 0.0, 0.1, DType::f32), g = gen.normal({75, 300}, 0.0, 1.0, DType::f32);
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  // The float path, by the kernels: dh stored, then both products and the sums.
  const core::GeluWithSlope r = core::bias_gelu_forward(core::linear(x, w, Tensor()), b, true);
  const core::GeluSlopeGrads dh = core::gelu_backward_with_slope(g, r.slope_values(), true);  // the slope as kept
  const core::LinearGrads want = core::linear_backward(dh.dh, x, w, true, true);
  for (const bool scope : {false, true}) {
    SCOPED_TRACE(scope ? "in a scope" : "no scope");
    const Variable xv(x.clone(), true), wv(w, true), bv(b, true);
    std::optional<core::Bf16Operands> operands;
    if (scope) operands.emplace();
    const Variable y = linear_gelu(xv, wv, bv);
    EXPECT_TRUE(identical_bits(y.value(), r.y));
    (void)sum(mul(y, Variable(g))).backward();
    EXPECT_TRUE(identical_bits(xv.grad(), want.dx));
    EXPECT_TRUE(identical_bits(wv.grad(), want.dweight));
    EXPECT_TRUE(identical_bits(bv.grad(), dh.column_sums));
  }
}

// The held copy against its source: dW from it is dW from the float32 input
// in bf16, after the input is freed, the scope closed and the next scope's
// products have rounded theirs; should the
// products be back in f32, its rounded values stand in.
TEST(Bf16Release, AHeldCopyGivesTheInputsGradientBitsAfterTheInputIsFreed) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  core::Generator gen(22);
  const Tensor w = gen.normal({20, 24}, 0.0, 1.0, DType::f32), g = gen.normal({37, 20}, 0.0, 1.0, DType::f32);
  Tensor x = gen.normal({37, 24}, 0.0, 1.0, DType::f32);
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  const core::LinearGrads want = core::linear_backward(g, x, w, true, true, true);
  Tensor rounded = Tensor::empty({37, 24}, DType::f32);  // x's values through bf16
  core::Bf16Copy copy;
  {
    const core::Bf16Operands scope;
    EXPECT_FALSE(core::held_bf16_copy(x));  // not rounded yet
    (void)core::linear(x, w, Tensor());
    copy = core::held_bf16_copy(x);
    ASSERT_TRUE(copy);
    for (int64_t i = 0; i < x.numel(); ++i) rounded.data<float>()[i] = core::from_bf16(copy.data()[i]);
    x = Tensor();  // the last reference: its storage goes
  }
  {
    const core::Bf16Operands next_step;  // rounds a new input of the same size: not into the held buffer
    (void)core::linear(gen.normal({37, 24}, 0.0, 1.0, DType::f32), w, Tensor());
  }
  const core::LinearGrads got = core::linear_backward(g, copy, w, true, true, true);
  EXPECT_TRUE(identical_bits(got.dx, want.dx));
  EXPECT_TRUE(identical_bits(got.dweight, want.dweight));
  EXPECT_TRUE(identical_bits(got.dbias, want.dbias));
  const test::PrecisionScope f32(core::GemmPrecision::f32);
  EXPECT_TRUE(identical_bits(core::linear_backward(g, copy, w, false, true).dweight,
                             core::linear_backward(g, rounded, w, false, true).dweight));
  EXPECT_THROW(core::linear_backward(g, core::Bf16Copy{}, w, false, true), std::invalid_argument);
}

// Attention's rounded copies stand in for q, k and v once one of them is
// released. Held all three (as a hook may hold them), they are read as they
// are at the backward: the key projection's gradient (dK = dS^T Q) follows
// a change made to q in place after the forward; and with only q held (k
// and v released), the copies serve, whatever q holds then.
TEST(Bf16Release, AttentionReadsQKAndVStillHeldAsTheyAreAtTheBackward) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  core::Generator gen(23);
  const Variable x(gen.normal({2, 40, 24}, 0.0, 1.0, DType::f32));
  const Tensor weights = gen.normal({2, 40, 24}, 0.0, 1.0, DType::f32);
  std::vector<Variable> w;
  for (int i = 0; i < 3; ++i) w.emplace_back(gen.normal({24, 24}, 0.0, 0.3, DType::f32), true);
  const auto key_grad = [&](bool change, bool hold_all) {
    for (Variable& p : w) p.zero_grad();
    const core::Bf16Operands scope;
    const Variable q = linear(x, w[0], Variable());
    Variable k = linear(x, w[1], Variable()), v = linear(x, w[2], Variable());
    const Variable out = attention(q, k, v, 3, true, 0.2);
    if (!hold_all) k = v = Variable();
    EXPECT_FALSE(q.node()->released());
    if (change) {
      float* p = q.value().data<float>();
      for (int64_t i = 0; i < q.numel(); ++i) p[i] *= 1.5f;
    }
    sum(mul(out, Variable(weights))).backward();
    return w[1].grad();
  };
  const Tensor unchanged = key_grad(false, true);
  EXPECT_FALSE(identical_bits(key_grad(true, true), unchanged));
  EXPECT_TRUE(identical_bits(key_grad(true, false), unchanged));
}

}  // namespace
}  // namespace headlab::autograd

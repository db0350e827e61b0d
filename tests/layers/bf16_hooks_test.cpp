// bf16 mixed precision with operands rounded once per scope
// (core/bf16_operands.h) and hooks that change values in place: a hook may
// change an activation or a weight that a product already rounded, and the
// later products (the rest of the forward, the backward's dx and dW) must
// read the changed value, as the packing path does. Every hook visit drops
// the scope's copies; without that the gradients below would differ.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/bf16_operands.h"
#include "core/gemm.h"
#include "core/random.h"
#include "layers/hooks.h"
#include "layers/transformer.h"
#include "tests/precision.h"

namespace headlab::layers {
namespace {

using core::DType;

// At ln1's output, keeps it; at `later`, a point of the block after Q, K
// and V's products rounded that output and W_Q (hook_resid_mid, or the copy
// hook_mlp_in), scales both in place.
class ScaleInPlace final : public Hooks {
 public:
  ScaleInPlace(Variable w_q, std::string later) : w_q_(std::move(w_q)), later_(std::move(later)) {}
  bool wants(const std::string& name) const override {
    return name == "blocks.0.ln1.hook_normalized" || name == later_;
  }
  Variable visit(const std::string& name, const Variable& a) override {
    if (name == "blocks.0.ln1.hook_normalized") {
      normalized_ = a;
    } else {
      scale(normalized_.value());
      scale(w_q_.value());
    }
    return a;
  }

 private:
  static void scale(const Tensor& t) {
    float* p = t.data<float>();  // contiguous: a layer's output, a parameter
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 1.5f;
  }
  Variable w_q_, normalized_;
  std::string later_;
};

// The gradients of every parameter after one forward and backward of a
// fresh model (seeded alike every time), with the hook above scaling at
// `later`, in bf16; inside a Bf16Operands scope or not.
std::vector<Tensor> grads_with_scaling_hook(const std::string& later, bool scoped) {
  const ModelSpec spec{.vocab = 7, .max_seq_len = 16, .layers = 2, .heads = 2, .d_model = 16, .d_ff = 32};
  core::Generator gen(4);
  Transformer model(spec, gen, DType::f32);
  for (auto& [name, p] : model.named_parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.3, DType::f32));
  std::vector<int32_t> tokens(3 * 9);
  for (auto& t : tokens) t = static_cast<int32_t>(gen.next_u64() % 7);
  ScaleInPlace hook(model.attention(0).q().weight(), later);
  Probe probe;
  probe.hooks = &hook;
  std::unique_ptr<core::Bf16Operands> scope;
  if (scoped) scope = std::make_unique<core::Bf16Operands>();
  const Variable logits = model.forward(tokens, 3, 9, nullptr, &probe);
  const Variable weights(gen.normal(logits.shape(), 0.0, 1.0, DType::f32));
  autograd::sum(autograd::mul(logits, weights)).backward();
  std::vector<Tensor> grads;
  for (auto& [name, p] : model.named_parameters()) grads.push_back(p.grad());
  return grads;
}

TEST(Bf16Hooks, AHookChangingRoundedValuesInPlaceIsFollowedByTheLaterProducts) {
  if (!core::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no bf16 units (AVX512_BF16 or AMX-BF16)";
  const test::PrecisionScope bf16(core::GemmPrecision::bf16);
  for (const std::string later : {"blocks.0.hook_resid_mid", "blocks.0.hook_mlp_in"}) {
    SCOPED_TRACE(later);
    const std::vector<Tensor> packed = grads_with_scaling_hook(later, false), kept = grads_with_scaling_hook(later, true);
    ASSERT_EQ(packed.size(), kept.size());
    for (std::size_t i = 0; i < packed.size(); ++i) {
      ASSERT_TRUE(packed[i].defined() && kept[i].defined());
      const Tensor a = packed[i].contiguous(), b = kept[i].contiguous();
      EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * sizeof(float)), 0)
          << "parameter " << i;
    }
  }
}

}  // namespace
}  // namespace headlab::layers

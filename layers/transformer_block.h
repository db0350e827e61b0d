// One pre-LayerNorm decoder block:
//   x = x + attn(ln1(x));  x = x + mlp(ln2(x))
// Built from a ModelSpec (d_model, heads, d_ff, attn_only, layernorm,
// causal): attn_only drops the MLP and ln2; layernorm false drops ln1 and ln2.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "layers/attention.h"
#include "layers/hooks.h"
#include "layers/layer_norm.h"
#include "layers/mlp.h"
#include "layers/model_spec.h"
#include "layers/module.h"
#include "layers/probe.h"

namespace headlab::layers {

class TransformerBlock : public Module {
 public:
  // Submodules in this order: "ln1" (if layernorm), "attn", "ln2" (if
  // layernorm and not attn_only), "mlp" (if not attn_only).
  TransformerBlock(const ModelSpec& spec, core::Generator& gen, DType dtype = DType::f32);

  // x [B, T, d_model] -> [B, T, d_model]; padding_mask and probe as in
  // MultiHeadAttention; the probe also receives the block's output (residual).
  // `hooks` (prefix "blocks.{i}.") visits the block's points of layers/hooks.h;
  // std::invalid_argument when they replace a head's input (hook_attn_in,
  // hook_q_input ...) and want one of ln1's points, which the pass then lacks.
  Variable forward(const Variable& x, const Tensor* padding_mask = nullptr, LayerProbe* probe = nullptr,
                   const HookScope& hooks = {}) const;

  const ModelSpec& spec() const { return spec_; }
  MultiHeadAttention& attention() const { return *attn_; }
  LayerNorm* ln1() const { return ln1_.get(); }  // null without layernorm
  LayerNorm* ln2() const { return ln2_.get(); }  // null without layernorm or with attn_only
  MLP* mlp() const { return mlp_.get(); }        // null with attn_only

 private:
  // ln1 and attention: resid_pre -> attn_out before its hook.
  Variable attend(const Variable& resid_pre, const Tensor* padding_mask, LayerProbe* probe,
                  const HookScope& hooks) const;

  ModelSpec spec_;  // resolved
  std::shared_ptr<LayerNorm> ln1_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<LayerNorm> ln2_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace headlab::layers

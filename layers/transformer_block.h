// One pre-LayerNorm decoder block:
//   x = x + attn(ln1(x));  x = x + mlp(ln2(x))
// attn_only drops the MLP and ln2; layernorm(false) drops ln1 and ln2.
#pragma once

#include <cstdint>
#include <memory>

#include "core/random.h"
#include "layers/attention.h"
#include "layers/layer_norm.h"
#include "layers/mlp.h"
#include "layers/module.h"
#include "layers/probe.h"

namespace headlab::layers {

struct TransformerBlockOptions {
  TransformerBlockOptions(int64_t d_model, int64_t heads, int64_t d_ff)
      : d_model_(d_model), heads_(heads), d_ff_(d_ff) {}
  TransformerBlockOptions& d_model(int64_t v) { d_model_ = v; return *this; }
  TransformerBlockOptions& heads(int64_t v) { heads_ = v; return *this; }
  TransformerBlockOptions& d_ff(int64_t v) { d_ff_ = v; return *this; }
  TransformerBlockOptions& attn_only(bool v) { attn_only_ = v; return *this; }
  TransformerBlockOptions& layernorm(bool v) { layernorm_ = v; return *this; }
  TransformerBlockOptions& causal(bool v) { causal_ = v; return *this; }
  int64_t d_model() const { return d_model_; }
  int64_t heads() const { return heads_; }
  int64_t d_ff() const { return d_ff_; }
  bool attn_only() const { return attn_only_; }
  bool layernorm() const { return layernorm_; }
  bool causal() const { return causal_; }

 private:
  int64_t d_model_;
  int64_t heads_;
  int64_t d_ff_;
  bool attn_only_ = false;
  bool layernorm_ = true;
  bool causal_ = true;
};

class TransformerBlock : public Module {
 public:
  // Submodules in this order: "ln1" (if layernorm), "attn", "ln2" (if
  // layernorm and not attn_only), "mlp" (if not attn_only).
  TransformerBlock(const TransformerBlockOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // x [B, T, d_model] -> [B, T, d_model]; padding_mask and probe as in
  // MultiHeadAttention; the probe also receives the block's output (residual).
  Variable forward(const Variable& x, const Tensor* padding_mask = nullptr, LayerProbe* probe = nullptr) const;

  const TransformerBlockOptions& options() const { return options_; }
  MultiHeadAttention& attention() const { return *attn_; }
  LayerNorm* ln1() const { return ln1_.get(); }  // null without layernorm
  LayerNorm* ln2() const { return ln2_.get(); }  // null without layernorm or with attn_only
  MLP* mlp() const { return mlp_.get(); }        // null with attn_only

 private:
  TransformerBlockOptions options_;
  std::shared_ptr<LayerNorm> ln1_;
  std::shared_ptr<MultiHeadAttention> attn_;
  std::shared_ptr<LayerNorm> ln2_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace headlab::layers

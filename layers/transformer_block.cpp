#include "layers/transformer_block.h"

#include <utility>

#include "autograd/ops.h"

namespace headlab::layers {

TransformerBlock::TransformerBlock(const ModelSpec& spec, core::Generator& gen, DType dtype)
    : spec_(spec.resolved()) {
  const int64_t d = spec_.d_model;
  if (spec_.layernorm) {
    ln1_ = register_module("ln1", std::make_shared<LayerNorm>(LayerNormOptions{.normalized_size = d}, gen, dtype));
  }
  attn_ = register_module("attn", std::make_shared<MultiHeadAttention>(spec_, gen, dtype));
  if (!spec_.attn_only) {
    if (spec_.layernorm) {
      ln2_ = register_module("ln2", std::make_shared<LayerNorm>(LayerNormOptions{.normalized_size = d}, gen, dtype));
    }
    mlp_ = register_module("mlp", std::make_shared<MLP>(MLPOptions{.d_model = d, .d_ff = spec_.d_ff, .relu = spec_.activation == "relu"}, gen, dtype));
  }
}

Variable TransformerBlock::forward(const Variable& x, const Tensor* padding_mask, LayerProbe* probe,
                                  const HookScope& hooks) const {
  const Variable resid_pre = hooks.visit("hook_resid_pre", x);
  const Variable normalized = ln1_ ? ln1_->forward(resid_pre, hooks.inner("ln1.")) : resid_pre;
  const Variable attn_out = hooks.visit("hook_attn_out", attn_->forward(normalized, padding_mask, probe, hooks.inner("attn.")));
  Variable h;
  if (!mlp_) {
    h = resid_pre + attn_out;
  } else {
    const bool want_mid = hooks.wants("hook_resid_mid");
    Variable in;
    if (ln2_ && !want_mid && !hooks.wants("ln2.hook_scale")) {
      // The residual add and ln2 in one pass (the same bits as apart); a
      // hook at resid_mid may replace the sum, and one at ln2's scale needs
      // the LayerNorm's own steps, so then the two run apart.
      autograd::AddLayerNorm mid = ln2_->forward_sum(resid_pre, attn_out);
      h = std::move(mid.sum);
      in = hooks.visit("ln2.hook_normalized", mid.normalized);
    } else {
      h = resid_pre + attn_out;
      if (want_mid) h = hooks.visit_wanted("hook_resid_mid", h);
      in = ln2_ ? ln2_->forward(h, hooks.inner("ln2.")) : h;
    }
    h = h + hooks.visit("hook_mlp_out", mlp_->forward(in, hooks.inner("mlp.")));
  }
  h = hooks.visit("hook_resid_post", h);
  if (probe != nullptr) probe->residual = h.value();
  return h;
}

}  // namespace headlab::layers

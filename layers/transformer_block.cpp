#include "layers/transformer_block.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "layers/head_inputs.h"

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

namespace {

// ln1's points are one LayerNorm of the residual stream, shared by every
// head; heads reading inputs of their own go through ln1 apart, so a pass
// in which they do has no activation there to show.
void refuse_ln1_points(const HookScope& hooks, const char* replaced) {
  for (const char* point : {"ln1.hook_scale", "ln1.hook_normalized"})
    if (hooks.wants(point))
      throw std::invalid_argument(
          "hooks want " + hooks.prefix + point + " in a pass that replaces " + hooks.prefix + replaced +
          ": the heads then read inputs of their own, each through ln1 apart, and " + hooks.prefix +
          "ln1 has no [B, T] activation shared by the heads; want " + hooks.prefix + point +
          " in a pass of its own (or, after ln1, " + hooks.prefix + "attn.hook_q, hook_k, hook_v)");
}

}  // namespace

Variable TransformerBlock::attend(const Variable& resid_pre, const Tensor* padding_mask, LayerProbe* probe,
                                  const HookScope& hooks) const {
  const HeadInputs heads = visit_head_inputs(resid_pre, spec_.heads, hooks);
  if (heads.replaced == nullptr) {
    const Variable normalized = ln1_ ? ln1_->forward(resid_pre, hooks.inner("ln1.")) : resid_pre;
    return attn_->forward(normalized, padding_mask, probe, hooks.inner("attn."));
  }
  // TransformerLens's ln1 per head: each head's input normalized apart
  // (attn_in alone: one input for Q, K and V, normalized once).
  if (ln1_) refuse_ln1_points(hooks, heads.replaced);
  const auto ln1 = [&](const Variable& x) { return ln1_ && x.defined() ? ln1_->forward(x) : x; };
  AttentionInput in{.x = ln1(resid_pre), .q = ln1(heads.q)};
  in.k = heads.k.node() == heads.q.node() ? in.q : ln1(heads.k);
  in.v = heads.v.node() == heads.k.node() ? in.k : ln1(heads.v);
  return attn_->forward(in, padding_mask, probe, hooks.inner("attn."));
}

Variable TransformerBlock::forward(const Variable& x, const Tensor* padding_mask, LayerProbe* probe,
                                  const HookScope& hooks) const {
  const Variable resid_pre = hooks.visit("hook_resid_pre", x);
  const Variable attn_out = hooks.visit("hook_attn_out", attend(resid_pre, padding_mask, probe, hooks));
  Variable h;
  if (!mlp_) {
    h = resid_pre + attn_out;
  } else {
    const bool want_mid = hooks.wants("hook_resid_mid"), want_in = hooks.wants("hook_mlp_in");
    Variable in;
    if (ln2_ && !want_mid && !want_in && !hooks.wants("ln2.hook_scale")) {
      // The residual add and ln2 in one pass (the same bits as apart); a
      // hook at resid_mid or mlp_in may replace what ln2 reads, and one at
      // ln2's scale needs the LayerNorm's own steps, so then the two run apart.
      autograd::AddLayerNorm mid = ln2_->forward_sum(resid_pre, attn_out);
      h = std::move(mid.sum);
      in = hooks.visit("ln2.hook_normalized", mid.normalized);
    } else {
      h = resid_pre + attn_out;
      if (want_mid) h = hooks.visit_wanted("hook_resid_mid", h);
      // mlp_in is a copy of resid_mid that only ln2 and the MLP read: a
      // replacement leaves the skip path (h) as it is.
      Variable mlp_in = want_in ? hooks.replacement("hook_mlp_in", hook_copy(h)) : Variable();
      if (!mlp_in.defined()) mlp_in = h;
      in = ln2_ ? ln2_->forward(mlp_in, hooks.inner("ln2.")) : mlp_in;
    }
    h = h + hooks.visit("hook_mlp_out", mlp_->forward(in, hooks.inner("mlp.")));
  }
  h = hooks.visit("hook_resid_post", h);
  if (probe != nullptr && probe->keep.residual) probe->residual = h.value();
  return h;
}

}  // namespace headlab::layers

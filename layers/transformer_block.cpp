#include "layers/transformer_block.h"

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

Variable TransformerBlock::forward(const Variable& x, const Tensor* padding_mask, LayerProbe* probe) const {
  Variable h = x + attn_->forward(ln1_ ? ln1_->forward(x) : x, padding_mask, probe);
  if (mlp_) h = h + mlp_->forward(ln2_ ? ln2_->forward(h) : h);
  if (probe != nullptr) probe->residual = h.value();
  return h;
}

}  // namespace headlab::layers

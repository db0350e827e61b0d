#include "layers/transformer_block.h"

#include "autograd/ops.h"

namespace headlab::layers {

TransformerBlock::TransformerBlock(const TransformerBlockOptions& options, core::Generator& gen, DType dtype)
    : options_(options) {
  const int64_t d = options.d_model();
  if (options.layernorm()) {
    ln1_ = register_module("ln1", std::make_shared<LayerNorm>(LayerNormOptions(d), gen, dtype));
  }
  attn_ = register_module(
      "attn", std::make_shared<MultiHeadAttention>(
                  MultiHeadAttentionOptions(d, options.heads()).causal(options.causal()), gen, dtype));
  if (!options.attn_only()) {
    if (options.layernorm()) {
      ln2_ = register_module("ln2", std::make_shared<LayerNorm>(LayerNormOptions(d), gen, dtype));
    }
    mlp_ = register_module("mlp", std::make_shared<MLP>(MLPOptions(d, options.d_ff()), gen, dtype));
  }
}

Variable TransformerBlock::forward(const Variable& x, const Tensor* padding_mask, LayerProbe* probe) const {
  Variable h = x + attn_->forward(ln1_ ? ln1_->forward(x) : x, padding_mask, probe);
  if (mlp_) h = h + mlp_->forward(ln2_ ? ln2_->forward(h) : h);
  if (probe != nullptr) probe->residual = h.value();
  return h;
}

}  // namespace headlab::layers

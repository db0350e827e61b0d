// The decoder-only transformer (docs/model.md):
//   x = tok_emb[tokens] + pos_emb[0..T-1]
//   x = block_i(x) for each layer            (pre-LN, see transformer_block.h)
//   logits = ln_f(x) W_head^T + b_head       (ln_f only with layernorm)
// Parameter names and shapes are listed in docs/model.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/random.h"
#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/model_spec.h"
#include "layers/module.h"
#include "layers/module_list.h"
#include "layers/probe.h"
#include "layers/transformer_block.h"

namespace headlab::layers {

class Transformer : public Module {
 public:
  // Validates the spec (std::invalid_argument, see ModelSpec::validate),
  // then builds and initializes (docs/model.md) the submodules in this order:
  // tok_emb, pos_emb, blocks.0 .. blocks.{L-1}, ln_f (with layernorm), head.
  Transformer(const ModelSpec& spec, core::Generator& gen, DType dtype = DType::f32);

  // tokens [batch, seq_len] row-major, ids in [0, vocab) -> logits
  // [batch, seq_len, classes]. padding_mask [batch, seq_len]: nonzero = real
  // token, 0 = pad (pad keys receive no attention); nullptr or an undefined
  // tensor: no padding (layers/padding_mask.h builds it from row lengths). `probe` (optional, one
  // entry per layer or none, see layers/probe.h) gates heads and receives
  // each layer's attention, head outputs and residual stream, and its hooks
  // visit the named points of layers/hooks.h; the model itself is never
  // changed. Throws std::invalid_argument naming a bad size,
  // seq_len > max_seq_len, an id out of range or a probe of the wrong size.
  Variable forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len,
                   const Tensor* padding_mask = nullptr, Probe* probe = nullptr) const;

  // The rest of such a pass from block `layer` on: `resid_pre` [batch,
  // seq_len, d_model] is the residual stream entering that block
  // (blocks.{layer}.hook_resid_pre), such as the residual a probe kept of
  // block layer - 1 in an earlier pass on the same tokens. The blocks before
  // are not run: the probe's entries for them are left as they are, and its
  // hooks visit only the points from that block on. Given what forward()
  // computes there, it returns forward()'s logits bit for bit: an analysis
  // that changes only block `layer` onward (a head of that layer ablated)
  // need not run the blocks before again (docs/architecture.md). Throws
  // std::invalid_argument naming a layer outside [0, layers), a resid_pre
  // that is not [B, T, d_model] of the model's dtype, T > max_seq_len or a
  // probe of the wrong size.
  Variable forward_from(int64_t layer, const Variable& resid_pre, const Tensor* padding_mask = nullptr,
                        Probe* probe = nullptr) const;

  // The spec it was built from, with its defaults spelled out (resolved()).
  const ModelSpec& spec() const { return spec_; }
  DType dtype() const { return dtype_; }
  int64_t num_layers() const { return spec_.layers; }
  TransformerBlock& block(int64_t layer) const;
  MultiHeadAttention& attention(int64_t layer) const { return block(layer).attention(); }
  // The output projection W_U (weight [classes, d_model]) and the final
  // LayerNorm (nullptr without layernorm): what direct logit attribution reads.
  const Linear& unembed() const { return *head_; }
  const LayerNorm* final_norm() const { return ln_f_.get(); }

 private:
  // Blocks `layer` .. L-1 on x (their input), the final LayerNorm and the
  // unembedding: the part forward and forward_from share.
  Variable run_from(int64_t layer, Variable x, const Tensor* padding_mask, Probe* probe) const;

  ModelSpec spec_;
  DType dtype_;
  std::shared_ptr<Embedding> tok_emb_;
  std::shared_ptr<PositionalEmbedding> pos_emb_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;
};

}  // namespace headlab::layers

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
#include "layers/module.h"
#include "layers/module_list.h"
#include "layers/probe.h"
#include "layers/transformer_block.h"

namespace headlab::layers {

struct TransformerOptions {
  TransformerOptions() = default;
  // Input vocabulary: token ids are in [0, vocab).
  TransformerOptions& vocab(int64_t v) { vocab_ = v; return *this; }
  // Output classes (logits per position); by default equal to vocab.
  TransformerOptions& classes(int64_t v) { classes_ = v; classes_set_ = true; return *this; }
  TransformerOptions& max_seq_len(int64_t v) { max_seq_len_ = v; return *this; }
  TransformerOptions& layers(int64_t v) { layers_ = v; return *this; }
  TransformerOptions& heads(int64_t v) { heads_ = v; return *this; }
  TransformerOptions& d_model(int64_t v) { d_model_ = v; return *this; }
  // MLP width; by default 4 * d_model.
  TransformerOptions& d_ff(int64_t v) { d_ff_ = v; d_ff_set_ = true; return *this; }
  TransformerOptions& attn_only(bool v) { attn_only_ = v; return *this; }
  TransformerOptions& layernorm(bool v) { layernorm_ = v; return *this; }
  TransformerOptions& causal(bool v) { causal_ = v; return *this; }

  int64_t vocab() const { return vocab_; }
  int64_t classes() const { return classes_set_ ? classes_ : vocab_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  int64_t layers() const { return layers_; }
  int64_t heads() const { return heads_; }
  int64_t d_model() const { return d_model_; }
  int64_t d_ff() const { return d_ff_set_ ? d_ff_ : 4 * d_model_; }
  int64_t d_k() const { return heads_ > 0 ? d_model_ / heads_ : 0; }
  bool attn_only() const { return attn_only_; }
  bool layernorm() const { return layernorm_; }
  bool causal() const { return causal_; }

  // Throws std::invalid_argument naming the first nonsensical option: a size
  // below 1, or a d_model that heads does not divide.
  void validate() const;

 private:
  int64_t vocab_ = 16;
  int64_t classes_ = 0;  // used once classes_set_
  bool classes_set_ = false;
  int64_t max_seq_len_ = 32;
  int64_t layers_ = 2;
  int64_t heads_ = 4;
  int64_t d_model_ = 64;
  int64_t d_ff_ = 0;  // used once d_ff_set_
  bool d_ff_set_ = false;
  bool attn_only_ = false;
  bool layernorm_ = true;
  bool causal_ = true;
};

class Transformer : public Module {
 public:
  // Validates the options, then builds and initializes (docs/model.md) the
  // submodules in this order: tok_emb, pos_emb, blocks.0 .. blocks.{L-1},
  // ln_f (with layernorm), head.
  Transformer(const TransformerOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // tokens [batch, seq_len] row-major, ids in [0, vocab) -> logits
  // [batch, seq_len, classes]. padding_mask [batch, seq_len]: nonzero = real
  // token, 0 = pad (pad keys receive no attention). `probe` (optional, one
  // entry per layer, see layers/probe.h) gates heads and receives each
  // layer's attention, head outputs and residual stream; the model itself
  // is never changed. Throws std::invalid_argument naming a bad size,
  // seq_len > max_seq_len, an id out of range or a probe of the wrong size.
  Variable forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len,
                   const Tensor* padding_mask = nullptr, Probe* probe = nullptr) const;

  const TransformerOptions& options() const { return options_; }
  DType dtype() const { return dtype_; }
  int64_t num_layers() const { return options_.layers(); }
  TransformerBlock& block(int64_t layer) const;
  MultiHeadAttention& attention(int64_t layer) const { return block(layer).attention(); }

 private:
  TransformerOptions options_;
  DType dtype_;
  std::shared_ptr<Embedding> tok_emb_;
  std::shared_ptr<PositionalEmbedding> pos_emb_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;
};

}  // namespace headlab::layers

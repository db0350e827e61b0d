#include "layers/transformer.h"

#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/interrupt.h"

namespace headlab::layers {

Transformer::Transformer(const ModelSpec& spec, core::Generator& gen, DType dtype)
    : spec_(spec.resolved()), dtype_(dtype) {
  spec_.validate();
  const int64_t d = spec_.d_model;
  tok_emb_ = register_module("tok_emb", std::make_shared<Embedding>(EmbeddingOptions{.num_embeddings = spec_.vocab, .embedding_dim = d}, gen, dtype));
  pos_emb_ = register_module(
      "pos_emb", std::make_shared<PositionalEmbedding>(EmbeddingOptions{.num_embeddings = spec_.max_seq_len, .embedding_dim = d}, gen, dtype));
  auto blocks = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < spec_.layers; ++i) {
    blocks_.push_back(blocks->push_back(std::make_shared<TransformerBlock>(spec_, gen, dtype)));
  }
  if (spec_.layernorm) {
    ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(LayerNormOptions{.normalized_size = d}, gen, dtype));
  }
  head_ = register_module("head", std::make_shared<Linear>(LinearOptions{.in_features = d, .out_features = spec_.classes}, gen, dtype));
}

TransformerBlock& Transformer::block(int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) {
    throw std::invalid_argument("Transformer: layer " + std::to_string(layer) + " is outside [0, " +
                                std::to_string(num_layers()) + ")");
  }
  return *blocks_[static_cast<std::size_t>(layer)];
}

Variable Transformer::forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq_len,
                              const Tensor* padding_mask, Probe* probe) const {
  if (batch < 1 || seq_len < 1) {
    throw std::invalid_argument("Transformer::forward: batch and seq_len must be at least 1, got batch=" +
                                std::to_string(batch) + ", seq_len=" + std::to_string(seq_len));
  }
  if (seq_len > spec_.max_seq_len) {
    throw std::invalid_argument("Transformer::forward: seq_len " + std::to_string(seq_len) +
                                " exceeds max_seq_len " + std::to_string(spec_.max_seq_len));
  }
  if (static_cast<int64_t>(tokens.size()) != batch * seq_len) {
    throw std::invalid_argument("Transformer::forward: " + std::to_string(tokens.size()) +
                                " tokens do not fill [batch=" + std::to_string(batch) +
                                ", seq_len=" + std::to_string(seq_len) + "]");
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= spec_.vocab) {
      const auto pos = static_cast<int64_t>(i);
      throw std::invalid_argument("Transformer::forward: token id " + std::to_string(tokens[i]) + " at [" +
                                  std::to_string(pos / seq_len) + ", " + std::to_string(pos % seq_len) +
                                  "] is outside the vocabulary [0, " + std::to_string(spec_.vocab) + ")");
    }
  }
  if (probe != nullptr && !probe->layers.empty() && static_cast<int64_t>(probe->layers.size()) != num_layers()) {
    throw std::invalid_argument("Transformer::forward: the probe has " + std::to_string(probe->layers.size()) +
                                " layers, the model " + std::to_string(num_layers()) + " (use Probe(num_layers()))");
  }
  const HookScope hooks{probe != nullptr ? probe->hooks : nullptr, ""};
  const bool per_layer = probe != nullptr && !probe->layers.empty();
  const Variable tok = hooks.visit("hook_embed", tok_emb_->forward(tokens, {batch, seq_len}));
  Variable pos = pos_emb_->forward(seq_len);
  // The cache's hook_pos_embed is [B, T, d] (TransformerLens's); the same
  // numbers reach the sum either way.
  if (hooks.wants("hook_pos_embed"))
    pos = hooks.visit_wanted("hook_pos_embed", autograd::expand(pos, {batch, seq_len, spec_.d_model}));
  // [B, T, d] + [T, d] broadcast over the batch.
  Variable x = tok + pos;
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    // A stop request (Ctrl-C) ends a long pass between its blocks (core/interrupt.h).
    core::check_interrupt();
    x = blocks_[l]->forward(x, padding_mask, per_layer ? &probe->layers[l] : nullptr,
                            hooks.inner("blocks." + std::to_string(l) + "."));
  }
  core::check_interrupt();
  if (ln_f_) x = ln_f_->forward(x, hooks.inner("ln_final."));
  return head_->forward(x);
}

}  // namespace headlab::layers

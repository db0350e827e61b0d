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

namespace {

void check_probe(const Transformer& model, const Probe* probe) {
  if (probe != nullptr && !probe->layers.empty() && static_cast<int64_t>(probe->layers.size()) != model.num_layers())
    throw std::invalid_argument("Transformer::forward: the probe has " + std::to_string(probe->layers.size()) +
                                " layers, the model " + std::to_string(model.num_layers()) +
                                " (use Probe(num_layers()))");
}

}  // namespace

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
  check_probe(*this, probe);
  const HookScope hooks{probe != nullptr ? probe->hooks : nullptr, ""};
  const Variable tok = hooks.visit("hook_embed", tok_emb_->forward(tokens, {batch, seq_len}));
  Variable pos = pos_emb_->forward(seq_len);
  // The cache's hook_pos_embed is [B, T, d] (TransformerLens's); the same
  // numbers reach the sum either way.
  if (hooks.wants("hook_pos_embed"))
    pos = hooks.visit_wanted("hook_pos_embed", autograd::expand(pos, {batch, seq_len, spec_.d_model}));
  // [B, T, d] + [T, d] broadcast over the batch.
  return run_from(0, tok + pos, padding_mask, probe);
}

Variable Transformer::forward_from(int64_t layer, const Variable& resid_pre, const Tensor* padding_mask,
                                   Probe* probe) const {
  block(layer);  // names a layer outside the model
  if (!resid_pre.defined()) throw std::invalid_argument("Transformer::forward_from: resid_pre is undefined");
  const Shape& s = resid_pre.shape();
  if (s.size() != 3 || s[2] != spec_.d_model || s[0] < 1 || s[1] < 1 || resid_pre.dtype() != dtype_)
    throw std::invalid_argument("Transformer::forward_from: resid_pre is " + core::to_string(resid_pre.dtype()) + " " +
                                core::to_string(s) + ", not " + core::to_string(dtype_) + " [B, T, d_model=" +
                                std::to_string(spec_.d_model) + "]");
  if (s[1] > spec_.max_seq_len)
    throw std::invalid_argument("Transformer::forward_from: seq_len " + std::to_string(s[1]) + " exceeds max_seq_len " +
                                std::to_string(spec_.max_seq_len));
  check_probe(*this, probe);
  return run_from(layer, resid_pre, padding_mask, probe);
}

Variable Transformer::run_from(int64_t layer, Variable x, const Tensor* padding_mask, Probe* probe) const {
  const HookScope hooks{probe != nullptr ? probe->hooks : nullptr, ""};
  const bool per_layer = probe != nullptr && !probe->layers.empty();
  for (auto l = static_cast<std::size_t>(layer); l < blocks_.size(); ++l) {
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

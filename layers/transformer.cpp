#include "layers/transformer.h"

#include <stdexcept>
#include <string>

#include "autograd/ops.h"

namespace headlab::layers {

namespace {

void require_positive(const char* name, int64_t value) {
  if (value < 1) {
    throw std::invalid_argument(std::string("TransformerOptions: ") + name + " must be at least 1, got " +
                                std::to_string(value));
  }
}

}  // namespace

void TransformerOptions::validate() const {
  require_positive("vocab", vocab());
  require_positive("classes", classes());
  require_positive("max_seq_len", max_seq_len());
  require_positive("layers", layers());
  require_positive("heads", heads());
  require_positive("d_model", d_model());
  if (!attn_only()) require_positive("d_ff", d_ff());
  if (d_model() % heads() != 0) {
    throw std::invalid_argument("TransformerOptions: d_model=" + std::to_string(d_model()) +
                                " is not divisible by heads=" + std::to_string(heads()) +
                                " (d_k = d_model / heads must be a whole number)");
  }
}

Transformer::Transformer(const TransformerOptions& options, core::Generator& gen, DType dtype)
    : options_(options), dtype_(dtype) {
  options.validate();
  const int64_t d = options.d_model();
  tok_emb_ = register_module("tok_emb", std::make_shared<Embedding>(EmbeddingOptions(options.vocab(), d), gen, dtype));
  pos_emb_ = register_module(
      "pos_emb", std::make_shared<PositionalEmbedding>(EmbeddingOptions(options.max_seq_len(), d), gen, dtype));
  auto blocks = register_module("blocks", std::make_shared<ModuleList>());
  const auto block_options = TransformerBlockOptions(d, options.heads(), options.d_ff())
                                 .attn_only(options.attn_only())
                                 .layernorm(options.layernorm())
                                 .causal(options.causal());
  for (int64_t i = 0; i < options.layers(); ++i) {
    blocks_.push_back(blocks->push_back(std::make_shared<TransformerBlock>(block_options, gen, dtype)));
  }
  if (options.layernorm()) {
    ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(LayerNormOptions(d), gen, dtype));
  }
  head_ = register_module("head", std::make_shared<Linear>(LinearOptions(d, options.classes()), gen, dtype));
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
  if (seq_len > options_.max_seq_len()) {
    throw std::invalid_argument("Transformer::forward: seq_len " + std::to_string(seq_len) +
                                " exceeds max_seq_len " + std::to_string(options_.max_seq_len()));
  }
  if (static_cast<int64_t>(tokens.size()) != batch * seq_len) {
    throw std::invalid_argument("Transformer::forward: " + std::to_string(tokens.size()) +
                                " tokens do not fill [batch=" + std::to_string(batch) +
                                ", seq_len=" + std::to_string(seq_len) + "]");
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= options_.vocab()) {
      const auto pos = static_cast<int64_t>(i);
      throw std::invalid_argument("Transformer::forward: token id " + std::to_string(tokens[i]) + " at [" +
                                  std::to_string(pos / seq_len) + ", " + std::to_string(pos % seq_len) +
                                  "] is outside the vocabulary [0, " + std::to_string(options_.vocab()) + ")");
    }
  }
  if (probe != nullptr && static_cast<int64_t>(probe->layers.size()) != num_layers()) {
    throw std::invalid_argument("Transformer::forward: the probe has " + std::to_string(probe->layers.size()) +
                                " layers, the model " + std::to_string(num_layers()) + " (use Probe(num_layers()))");
  }
  // [B, T, d] + [T, d] broadcast over the batch.
  Variable x = tok_emb_->forward(tokens, {batch, seq_len}) + pos_emb_->forward(seq_len);
  for (std::size_t l = 0; l < blocks_.size(); ++l)
    x = blocks_[l]->forward(x, padding_mask, probe != nullptr ? &probe->layers[l] : nullptr);
  if (ln_f_) x = ln_f_->forward(x);
  return head_->forward(x);
}

}  // namespace headlab::layers

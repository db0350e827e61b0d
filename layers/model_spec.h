// ModelSpec: the architecture of a Transformer, the one place its fields are
// listed. The training config embeds it (train/config.h maps the CLI flags
// onto these fields), checkpoints store it as their "model" JSON (the names
// below are those keys), and the model, its blocks and attention layers are
// built from it. docs/model.md explains each field.
#pragma once

#include <cstdint>
#include <string>

namespace headlab::layers {

struct ModelSpec {
  int64_t vocab = 16;        // input tokens are in [0, vocab)
  int64_t classes = 0;       // output logits per position; 0: = vocab
  int64_t max_seq_len = 32;  // positions of the positional embedding
  int64_t layers = 2;
  int64_t heads = 4;  // per layer; must divide d_model
  int64_t d_model = 64;
  int64_t d_ff = 0;  // MLP width; 0: 4 * d_model
  bool attn_only = false;  // no MLP in the blocks
  bool layernorm = true;   // pre-LN blocks and a final LayerNorm
  bool causal = true;      // query t never sees keys after t
  std::string activation = "gelu";  // the MLP's: "gelu" (exact erf form) or "relu"

  // Calls f(name, field reference) for every field above, in order.
  template <class Self, class F>
  static void visit_fields(Self& s, F&& f) {
    f("vocab", s.vocab);
    f("classes", s.classes);
    f("max_seq_len", s.max_seq_len);
    f("layers", s.layers);
    f("heads", s.heads);
    f("d_model", s.d_model);
    f("d_ff", s.d_ff);
    f("attn_only", s.attn_only);
    f("layernorm", s.layernorm);
    f("causal", s.causal);
    f("activation", s.activation);
  }

  // Each head's width, d_model / heads.
  int64_t d_k() const { return heads > 0 ? d_model / heads : 0; }
  // The same spec with the defaults spelled out: classes = vocab and
  // d_ff = 4 * d_model where they are 0.
  ModelSpec resolved() const;

  // The weights of the model's Linear layers, output head included: q, k, v,
  // o (d x d each) and, unless attn_only, the MLP's two (d x d_ff) per layer,
  // and the head (d x classes). The N of the FLOP count below.
  int64_t linear_weights() const;
  // FLOPs of one training step (forward and backward) on `batch` sequences of
  // max_seq_len tokens: 6 N + 12 L T d per token (the second term is the
  // attention scores and their products).
  double train_flops_per_step(int64_t batch) const;

  // How a message spells a field: by default its name above; a command line
  // passes its flag names ("--d-model").
  using FieldName = std::string (*)(const std::string& field);
  // Throws std::invalid_argument naming the first field that makes no sense:
  // a size below 1 (classes and d_ff below 0), an activation other than gelu
  // or relu, or heads that do not divide d_model, with the nearest head counts
  // and d_model that would.
  void validate(FieldName name = nullptr) const;
};

}  // namespace headlab::layers

// Embedding: a table [V, D] looked up by integer ids; and the learned
// positional embedding, a table [max_seq_len, D] read by position.
#pragma once

#include <cstdint>
#include <span>

#include "core/random.h"
#include "layers/module.h"

namespace headlab::layers {

struct EmbeddingOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
};

class Embedding : public Module {
 public:
  // Parameter: "weight" [num_embeddings, embedding_dim] ~ N(0, 0.02).
  Embedding(const EmbeddingOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // ids (each in [0, num_embeddings)) laid out as ids_shape -> ids_shape + [D].
  // Throws std::invalid_argument naming an id out of range or a size mismatch.
  Variable forward(std::span<const int32_t> ids, const Shape& ids_shape) const;

  const EmbeddingOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }

 private:
  EmbeddingOptions options_;
};

// A learned position table: row t is added to the token at position t.
class PositionalEmbedding : public Module {
 public:
  // Parameter: "weight" [max_seq_len, embedding_dim] ~ N(0, 0.02).
  PositionalEmbedding(const EmbeddingOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // The rows of positions 0 .. seq_len-1: [seq_len, D]. Throws
  // std::invalid_argument if seq_len is not in [1, max_seq_len].
  Variable forward(int64_t seq_len) const;

  int64_t max_seq_len() const { return options_.num_embeddings; }
  const EmbeddingOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }

 private:
  EmbeddingOptions options_;
};

}  // namespace headlab::layers

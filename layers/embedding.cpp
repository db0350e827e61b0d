#include "layers/embedding.h"

#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "layers/init.h"

namespace headlab::layers {

namespace {

void check_options(const EmbeddingOptions& options, const char* who) {
  if (options.num_embeddings <= 0 || options.embedding_dim <= 0) {
    throw std::invalid_argument(std::string(who) + ": num_embeddings and embedding_dim must be positive, got " +
                                std::to_string(options.num_embeddings) + " and " +
                                std::to_string(options.embedding_dim));
  }
}

}  // namespace

Embedding::Embedding(const EmbeddingOptions& options, core::Generator& gen, DType dtype) : options_(options) {
  check_options(options, "Embedding");
  register_parameter(
      "weight", init_normal_weight({options.num_embeddings, options.embedding_dim}, gen, dtype));
}

Variable Embedding::forward(std::span<const int32_t> ids, const Shape& ids_shape) const {
  const int64_t n = core::numel_of(ids_shape);
  if (n != static_cast<int64_t>(ids.size())) {
    throw std::invalid_argument("Embedding::forward: " + std::to_string(ids.size()) + " ids do not fill shape " +
                                core::to_string(ids_shape) + " (" + std::to_string(n) + " elements)");
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= options_.num_embeddings) {
      throw std::invalid_argument("Embedding::forward: id " + std::to_string(ids[i]) + " at index " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(options_.num_embeddings) +
                                  ")");
    }
  }
  return autograd::embedding(weight(), ids, ids_shape);
}

PositionalEmbedding::PositionalEmbedding(const EmbeddingOptions& options, core::Generator& gen, DType dtype)
    : options_(options) {
  check_options(options, "PositionalEmbedding");
  register_parameter(
      "weight", init_normal_weight({options.num_embeddings, options.embedding_dim}, gen, dtype));
}

Variable PositionalEmbedding::forward(int64_t seq_len) const {
  if (seq_len < 1 || seq_len > max_seq_len()) {
    throw std::invalid_argument("PositionalEmbedding::forward: seq_len " + std::to_string(seq_len) +
                                " is outside [1, max_seq_len=" + std::to_string(max_seq_len()) + "]");
  }
  return autograd::slice(weight(), 0, 0, seq_len);
}

}  // namespace headlab::layers

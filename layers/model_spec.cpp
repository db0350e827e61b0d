#include "layers/model_spec.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

namespace headlab::layers {
namespace {

std::string plain_name(const std::string& field) { return field; }

// The nearest head counts below and above `heads` that divide d_model, looking
// at most 1024 counts each way (both can be any user-given number, so no sum
// may overflow). Below starts at d_model, which always divides itself.
std::vector<int64_t> dividing_heads(int64_t d_model, int64_t heads) {
  std::vector<int64_t> found;
  const int64_t below = std::min(heads - 1, d_model);
  for (int64_t step = 0; step < 1024 && below - step >= 1; ++step)
    if (d_model % (below - step) == 0) {
      found.push_back(below - step);
      break;
    }
  for (int64_t step = 1; step <= 1024 && heads <= d_model - step; ++step)
    if (d_model % (heads + step) == 0) {
      found.push_back(heads + step);
      break;
    }
  return found;
}

}  // namespace

ModelSpec ModelSpec::resolved() const {
  ModelSpec s = *this;
  if (s.classes == 0) s.classes = s.vocab;
  if (s.d_ff == 0 && s.d_model <= std::numeric_limits<int64_t>::max() / 4) s.d_ff = 4 * s.d_model;
  return s;
}

int64_t ModelSpec::linear_weights() const {
  const ModelSpec s = resolved();
  const int64_t per_layer = 4 * s.d_model * s.d_model + (s.attn_only ? 0 : 2 * s.d_model * s.d_ff);
  return s.layers * per_layer + s.d_model * s.classes;
}

double ModelSpec::train_flops_per_step(int64_t batch) const {
  const double tokens = static_cast<double>(batch) * static_cast<double>(max_seq_len);
  return tokens * (6.0 * static_cast<double>(linear_weights()) +
                   12.0 * static_cast<double>(layers) * static_cast<double>(max_seq_len) * static_cast<double>(d_model));
}

void ModelSpec::validate(FieldName name) const {
  if (name == nullptr) name = plain_name;
  auto require = [&](bool ok, const char* field, int64_t value, const char* rule) {
    if (!ok) throw std::invalid_argument(name(field) + " must be " + rule + ", got " + std::to_string(value));
  };
  require(vocab >= 1, "vocab", vocab, "at least 1");
  require(classes >= 0, "classes", classes, "0 (the vocabulary's size) or more");
  require(max_seq_len >= 1, "max_seq_len", max_seq_len, "at least 1");
  require(layers >= 1, "layers", layers, "at least 1");
  require(heads >= 1, "heads", heads, "at least 1");
  require(d_model >= 1, "d_model", d_model, "at least 1");
  require(d_ff >= 0, "d_ff", d_ff, "0 (4 * d_model) or more");
  if (activation != "gelu" && activation != "relu")
    throw std::invalid_argument(name("activation") + " must be gelu or relu, got '" + activation + "'");
  if (d_model % heads == 0) return;
  // Each head reads its own d_k = d_model / heads columns of Q, K and V.
  std::string fits;
  for (const int64_t h : dividing_heads(d_model, heads))
    fits += (fits.empty() ? name("heads") + " " : " or ") + std::to_string(h);
  if (d_model <= std::numeric_limits<int64_t>::max() - heads)
    fits += (fits.empty() ? "" : ", or ") + name("d_model") + " " + std::to_string(d_model + heads - d_model % heads);
  throw std::invalid_argument(name("d_model") + " " + std::to_string(d_model) + " is not divisible by " +
                              name("heads") + " " + std::to_string(heads) +
                              ": each head gets d_model / heads dimensions" + (fits.empty() ? "" : " (try " + fits + ")"));
}

}  // namespace headlab::layers

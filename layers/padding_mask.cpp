#include "layers/padding_mask.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace headlab::layers {

core::Tensor padding_mask(std::span<const int32_t> lengths, int64_t batch, int64_t seq_len) {
  if (lengths.empty()) return {};
  if (static_cast<int64_t>(lengths.size()) != batch)
    throw std::invalid_argument("padding_mask: " + std::to_string(lengths.size()) + " lengths for a batch of " +
                                std::to_string(batch) + " rows");
  for (std::size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 1 || lengths[b] > seq_len)
      throw std::invalid_argument("padding_mask: row " + std::to_string(b) + " has length " +
                                  std::to_string(lengths[b]) + ", expected 1 .. seq_len = " + std::to_string(seq_len));
  if (std::all_of(lengths.begin(), lengths.end(), [&](int32_t n) { return n == seq_len; })) return {};
  core::Tensor mask = core::Tensor::zeros({batch, seq_len}, core::DType::f32);
  float* m = mask.data<float>();
  for (int64_t b = 0; b < batch; ++b) std::fill_n(m + b * seq_len, lengths[static_cast<std::size_t>(b)], 1.0f);
  return mask;
}

}  // namespace headlab::layers

// The padding mask of a batch whose rows are padded at their end
// (Transformer::forward's padding_mask; docs/model.md, "Padding").
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace headlab::layers {

// [batch, seq_len] f32: 1 at row b's first lengths[b] positions (its real
// tokens), 0 after them (padding). Undefined -- no mask, which the forward
// takes as nullptr -- when `lengths` is empty or every row is full, so that
// unpadded batches run exactly as they would without one, bit for bit.
// Throws std::invalid_argument unless lengths has `batch` entries in
// [1, seq_len].
core::Tensor padding_mask(std::span<const int32_t> lengths, int64_t batch, int64_t seq_len);

}  // namespace headlab::layers

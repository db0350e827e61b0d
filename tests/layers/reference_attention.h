// The lesson's multi-head attention computed head by head from raw core
// tensor ops (no autograd, no fused kernels), to check the layer against.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"
#include "layers/attention.h"

namespace headlab::layers::testing {

struct ReferenceOptions {
  bool causal = false;
  // [B, T], 1 = real token, 0 = pad key; undefined = no padding.
  core::Tensor padding_mask;
  // The width whose square root divides the scores; 0 = the per-head d_k.
  int64_t scale_dim = 0;
  // Heads whose output is left out of the concat (as a gate of 0 would).
  std::vector<int64_t> dropped_heads;

  ReferenceOptions& with_causal(bool v) { causal = v; return *this; }
  ReferenceOptions& with_padding(core::Tensor mask) { padding_mask = std::move(mask); return *this; }
  ReferenceOptions& with_scale_dim(int64_t v) { scale_dim = v; return *this; }
  ReferenceOptions& without_head(int64_t head) { dropped_heads.push_back(head); return *this; }
};

// softmax over the last axis: exp(s - max) / sum(exp(s - max)).
inline core::Tensor reference_softmax(const core::Tensor& s) {
  const core::Tensor e = core::exp(s - core::max(s, {-1}, true));
  return e / core::sum(e, {-1}, true);
}

// x [B, T, d_model] -> [B, T, d_model] with the layer's current weights.
inline core::Tensor reference_attention(const MultiHeadAttention& mha, const core::Tensor& x,
                                        const ReferenceOptions& ref = {}) {
  using core::Tensor;
  const int64_t batch = x.size(0), seq_len = x.size(1), d_model = x.size(2);
  const int64_t h = mha.heads(), dk = d_model / h;
  const double scale = 1.0 / std::sqrt(static_cast<double>(ref.scale_dim > 0 ? ref.scale_dim : dk));

  // hidden[b, q, k] = 1 where query q may not see key k.
  Tensor hidden = Tensor::zeros({batch, seq_len, seq_len}, x.dtype());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t q = 0; q < seq_len; ++q) {
      for (int64_t k = 0; k < seq_len; ++k) {
        const bool masked = (ref.causal && k > q) || (ref.padding_mask.defined() && ref.padding_mask.at({b, k}) == 0);
        hidden.set({b, q, k}, masked ? 1.0 : 0.0);
      }
    }
  }
  const Tensor minus_inf = Tensor::full({1}, -std::numeric_limits<double>::infinity(), x.dtype());

  Tensor concat = Tensor::zeros({batch, seq_len, d_model}, x.dtype());
  for (int64_t i = 0; i < h; ++i) {
    bool dropped = false;
    for (int64_t d : ref.dropped_heads) dropped = dropped || d == i;
    if (dropped) continue;
    auto project = [&](const Linear& lin) {
      // X W^i^T + b^i with W^i = rows i*d_k .. (i+1)*d_k - 1: [B, T, d_k]
      const Tensor w = lin.weight().value().slice(0, i * dk, (i + 1) * dk);
      const Tensor b = lin.bias().value().slice(0, i * dk, (i + 1) * dk);
      return core::matmul(x, w.transpose(0, 1)) + b;
    };
    const Tensor q = project(mha.q()), k = project(mha.k()), v = project(mha.v());
    const Tensor scores = core::where(hidden, minus_inf, core::matmul(q, k.transpose(1, 2)) * scale);
    const Tensor head = core::matmul(reference_softmax(scores), v);  // [B, T, d_k]
    concat.slice(2, i * dk, (i + 1) * dk).copy_(head);
  }
  return core::matmul(concat, mha.o().weight().value().transpose(0, 1)) + mha.o().bias().value();
}

}  // namespace headlab::layers::testing

#include "analysis/circuit_weights.h"

#include <stdexcept>
#include <string>

#include "core/ops.h"

namespace headlab::analysis {
namespace {

using core::DType;
using core::Tensor;

// A float64 copy: the circuits never share storage with the model.
Tensor f64(const Tensor& t) { return t.to(DType::f64).clone(); }

// W diag(g) P for W [rows, d] and the LayerNorm gain g [d]: scale the columns,
// then subtract each row's mean (M P = M - (M 1) 1^T / d).
Tensor fold_layernorm(const Tensor& w, const Tensor& gain) {
  const Tensor scaled = core::mul(w, gain.reshape({1, gain.numel()}));
  return core::sub(scaled, core::mean(scaled, {1}, /*keepdim=*/true)).contiguous();
}

}  // namespace

const HeadWeights& CircuitWeights::at(int64_t layer, int64_t head) const {
  if (layer < 0 || layer >= num_layers || head < 0 || head >= num_heads)
    throw std::invalid_argument("circuit weights: no head L" + std::to_string(layer) + "H" + std::to_string(head));
  return heads[static_cast<std::size_t>(layer * num_heads + head)];
}

CircuitWeights circuit_weights(const layers::Transformer& model) {
  const layers::ModelSpec& spec = model.spec();
  CircuitWeights w;
  w.num_layers = spec.layers;
  w.num_heads = spec.heads;
  w.d_model = spec.d_model;
  w.d_k = spec.d_k();
  w.layernorm_folded = spec.layernorm;
  w.mlp_ignored = !spec.attn_only;
  w.embed = f64(model.parameter("tok_emb.weight").value());
  w.pos = f64(model.parameter("pos_emb.weight").value());
  w.unembed = f64(model.parameter("head.weight").value());
  if (spec.layernorm) w.unembed = fold_layernorm(w.unembed, f64(model.parameter("ln_f.weight").value()));
  using P = layers::MultiHeadAttention::Projection;
  for (int64_t l = 0; l < spec.layers; ++l) {
    const layers::MultiHeadAttention& attn = model.attention(l);
    const layers::LayerNorm* ln = model.block(l).ln1();
    const Tensor gain = ln ? f64(ln->weight().value()) : Tensor();
    auto read = [&](P which, int64_t h) {
      const Tensor m = f64(attn.head_weight(which, h));
      return ln ? fold_layernorm(m, gain) : m;
    };
    for (int64_t h = 0; h < spec.heads; ++h)
      w.heads.push_back({read(P::Q, h), read(P::K, h), read(P::V, h), f64(attn.head_output_weight(h))});
  }
  return w;
}

}  // namespace headlab::analysis

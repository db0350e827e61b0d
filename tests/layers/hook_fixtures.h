// What the hook tests share: a model with weights large enough that a wrong
// bit of a split or an order shows, tokens, and a bitwise comparison.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/random.h"
#include "layers/transformer.h"

namespace headlab::layers::fixtures {

inline std::unique_ptr<Transformer> make_model(const ModelSpec& spec, core::DType dtype = core::DType::f32,
                                               uint64_t seed = 3) {
  core::Generator gen(seed);
  auto m = std::make_unique<Transformer>(spec, gen, dtype);
  // Weights larger than the init, so attention is sharp and a wrong bit of
  // the split or the order shows.
  for (auto& [name, p] : m->named_parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.3, dtype));
  return m;
}

inline std::vector<int32_t> some_tokens(const ModelSpec& spec, int64_t n, uint64_t seed = 11) {
  core::Generator gen(seed);
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(gen.next_u64() % static_cast<uint64_t>(spec.vocab));
  return t;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const std::size_t bytes = static_cast<std::size_t>(ac.numel()) * (a.dtype() == core::DType::f64 ? 8 : 4);
  return std::memcmp(ac.raw_data(), bc.raw_data(), bytes) == 0;
}

// A 2-layer model with LayerNorm and a GELU MLP, 2 heads of d_k 4.
inline const ModelSpec kBase{.vocab = 7, .max_seq_len = 80, .layers = 2, .heads = 2, .d_model = 8, .d_ff = 16};

// The model variants every hook point is checked on: each kind of block.
struct Variant {
  const char* what;
  ModelSpec spec;
  int64_t batch, seq;
  bool padded;
};

inline std::vector<Variant> variants() {
  ModelSpec attn_only = kBase, no_ln = kBase, relu = kBase, bidir = kBase;
  attn_only.attn_only = true;
  no_ln.layernorm = false;
  relu.activation = "relu";
  bidir.causal = false;
  // seq 70 > the causal kernels' 64-row chunk: two chunks.
  return {{"layernorm + GELU MLP, two causal chunks", kBase, 2, 70, false},
          {"attention-only", attn_only, 3, 9, false},
          {"no LayerNorm", no_ln, 2, 9, false},
          {"ReLU MLP", relu, 2, 9, false},
          {"bidirectional, padded", bidir, 2, 9, true}};
}

inline Tensor pad_mask(int64_t batch, int64_t seq) {
  std::vector<double> m(static_cast<std::size_t>(batch * seq), 1.0);
  m[static_cast<std::size_t>(seq - 1)] = 0.0;  // row 0's last token and ...
  m[static_cast<std::size_t>(seq - 2)] = 0.0;
  return Tensor::from_vector(m, {batch, seq}, core::DType::f32);
}

}  // namespace headlab::layers::fixtures

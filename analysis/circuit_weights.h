// A model's weights as the circuit analysis reads them (Elhage et al. 2021):
// every head's W_Q, W_K, W_V (reading the residual stream) and W_O (writing
// it), the embeddings and the unembedding, in float64 and in the column
// convention of the papers (a head's OV circuit maps a residual vector x to
// W_O W_V x; its QK circuit scores a query x and a key y as x^T W_Q^T W_K y).
//
// Exact for attention-only models without LayerNorm. With LayerNorm, each
// LayerNorm is folded into the weights that read it as its centering and its
// scale: ln(x) ~ g * (P x) with P = I - 11^T/d, so W_Q becomes W_Q diag(g) P
// (likewise W_K, W_V with the block's ln1, and W_U with ln_f). What the fold
// drops: the per-position factor 1/sigma(x) (a positive scalar, so it changes
// no sign and no ratio the scores use), every bias, and the MLPs, which are
// ignored altogether. docs/head-metrics.md states this.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "layers/transformer.h"

namespace headlab::analysis {

struct HeadWeights {
  core::Tensor q, k, v;  // [d_k, d_model], reading the residual (the block's ln1 folded in)
  core::Tensor o;        // [d_model, d_k], writing the residual
};

struct CircuitWeights {
  int64_t num_layers = 0, num_heads = 0, d_model = 0, d_k = 0;
  bool layernorm_folded = false;  // the model has LayerNorm (folded as above)
  bool mlp_ignored = false;       // the model has MLPs (left out)
  core::Tensor embed;             // W_E [vocab, d_model]: tok_emb.weight
  core::Tensor pos;               // W_pos [max_seq_len, d_model]: pos_emb.weight
  core::Tensor unembed;           // W_U [classes, d_model]: head.weight (ln_f folded in)
  std::vector<HeadWeights> heads; // layer-major: index = layer * num_heads + head

  const HeadWeights& at(int64_t layer, int64_t head) const;
};

// Copies the model's weights (float64; the model is not changed).
CircuitWeights circuit_weights(const layers::Transformer& model);

}  // namespace headlab::analysis

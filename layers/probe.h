// layers::Probe: what a caller changes in, and reads out of, one forward pass
// of a Transformer (docs/architecture.md, "Observing a forward pass").
//
// The model holds no analysis state: a forward pass without a probe does
// nothing extra, and one with a probe writes only into the probe, so several
// threads can probe one model at once (each with its own Probe) while it is
// not being trained.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"
#include "layers/hooks.h"

namespace headlab::layers {

using autograd::Variable;
using core::Tensor;

// Which outputs of a LayerProbe the pass writes. A pass read only for its
// logits keeps none: then the fused attention computes each block's
// probabilities in a per-thread buffer and frees nothing the size of
// [B, h, T, T] per layer, which a pass keeping them holds for every layer
// until the probe goes (docs/head-metrics.md, "What the analysis holds").
struct ProbeOutputs {
  bool attention = true, head_outputs = true, residual = true;
  static constexpr ProbeOutputs none() { return {false, false, false}; }
  static constexpr ProbeOutputs only_head_outputs() { return {false, true, false}; }
  static constexpr ProbeOutputs only_residual() { return {false, false, true}; }
};

// One attention layer's (and its block's) part of a probe.
struct LayerProbe {
  // In: per-head gates [h] of the model's dtype, multiplied into each head's
  // output before W_O (0 ablates a head). Undefined = all 1. A gate that
  // requires a gradient receives dL/dgate from backward.
  Variable gates{};
  // In: replace some heads' outputs (after the gate, before W_O) by given
  // values: for every head i with replace_heads[i] true, columns
  // i*d_k .. (i+1)*d_k - 1 of the concatenated head outputs become those of
  // `replacement` [B, T, d_model] (the model's dtype), a constant outside the
  // graph. This is how a caller patches a head's output from another run,
  // mean-ablates or resample-ablates it. Empty = no head replaced; otherwise
  // one entry per head. The other heads' columns are bit-identical to a pass
  // without replacement.
  std::vector<bool> replace_heads{};
  Tensor replacement{};
  // Out: the attention probabilities A [B, h, T, T], a value outside the graph.
  Tensor attention{};
  // Out: concat(gate_i * A_i V_i) [B, T, d_model] before W_O: head i's output
  // is columns i*d_k .. (i+1)*d_k - 1.
  Tensor head_outputs{};
  // Out: the residual stream after the block [B, T, d_model].
  Tensor residual{};
  // Which of the three outputs above this pass writes (the others stay undefined).
  ProbeOutputs keep{};
};

struct Probe {
  Probe() = default;
  explicit Probe(int64_t num_layers, ProbeOutputs keep = {}) : layers(static_cast<std::size_t>(num_layers)) {
    for (LayerProbe& layer : layers) layer.keep = keep;
  }
  // One entry per layer of the model, in order (may be empty when only
  // `hooks` is set).
  std::vector<LayerProbe> layers;
  // Optional: the named hook points the pass visits (layers/hooks.h). Not
  // owned; it outlives the pass.
  Hooks* hooks = nullptr;
};

}  // namespace headlab::layers

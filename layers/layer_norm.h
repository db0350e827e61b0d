// LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias.
#pragma once

#include <cstdint>

#include "autograd/ops.h"
#include "core/random.h"
#include "layers/hooks.h"
#include "layers/module.h"

namespace headlab::layers {

struct LayerNormOptions {
  int64_t normalized_size = 0;
  double eps = 1e-5;
};

class LayerNorm : public Module {
 public:
  // Parameters: "weight" [D] = 1, "bias" [D] = 0. Draws nothing from gen.
  LayerNorm(const LayerNormOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // x [..., D] -> [..., D]. `hooks` (prefix "blocks.{i}.ln1." and the like)
  // visits hook_scale, sqrt(var + eps) [..., 1], then hook_normalized, the
  // output (layers/hooks.h). A wanted hook_scale is computed on the side; if
  // the hook replaces it the output is (x - mean) / scale * weight + bias
  // with that scale, else the fused op's bits as without the hook.
  Variable forward(const Variable& x, const HookScope& hooks = {}) const;
  // a, b [..., D] -> {a + b, forward(a + b)} from one pass over the rows:
  // the residual add before this LayerNorm (autograd::add_layer_norm).
  autograd::AddLayerNorm forward_sum(const Variable& a, const Variable& b) const;

  const LayerNormOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }
  Variable bias() const { return own_parameter("bias"); }

 private:
  // forward with a wanted hook_scale.
  Variable forward_scale_hooked(const Variable& x, const HookScope& hooks) const;

  LayerNormOptions options_;
};

}  // namespace headlab::layers

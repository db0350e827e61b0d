// LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias.
#pragma once

#include <cstdint>

#include "autograd/ops.h"
#include "core/random.h"
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

  // x [..., D] -> [..., D]
  Variable forward(const Variable& x) const;
  // a, b [..., D] -> {a + b, forward(a + b)} from one pass over the rows:
  // the residual add before this LayerNorm (autograd::add_layer_norm).
  autograd::AddLayerNorm forward_sum(const Variable& a, const Variable& b) const;

  const LayerNormOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }
  Variable bias() const { return own_parameter("bias"); }

 private:
  LayerNormOptions options_;
};

}  // namespace headlab::layers

// Linear: y = x W^T + b, in PyTorch's layout (weight [out, in], bias [out]).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "layers/module.h"

namespace headlab::layers {

struct LinearOptions {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
};

class Linear : public Module {
 public:
  // Parameters: "weight" [out, in] ~ N(0, 0.02), then "bias" [out] = 0.
  Linear(const LinearOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // x [..., in] -> [..., out]
  Variable forward(const Variable& x) const;

  const LinearOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }
  Variable bias() const { return options_.bias ? own_parameter("bias") : Variable(); }  // undefined without bias

 private:
  LinearOptions options_;
};

}  // namespace headlab::layers

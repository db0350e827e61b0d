// Linear: y = x W^T + b, in PyTorch's layout (weight [out, in], bias [out]).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "layers/module.h"

namespace headlab::layers {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_(in_features), out_(out_features) {}
  LinearOptions& in_features(int64_t v) { in_ = v; return *this; }
  LinearOptions& out_features(int64_t v) { out_ = v; return *this; }
  LinearOptions& bias(bool v) { bias_ = v; return *this; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool bias() const { return bias_; }

 private:
  int64_t in_;
  int64_t out_;
  bool bias_ = true;
};

class Linear : public Module {
 public:
  // Parameters: "weight" [out, in] ~ N(0, 0.02), then "bias" [out] = 0.
  Linear(const LinearOptions& options, core::Generator& gen, DType dtype = DType::f32);

  // x [..., in] -> [..., out]
  Variable forward(const Variable& x) const;

  const LinearOptions& options() const { return options_; }
  Variable weight() const { return own_parameter("weight"); }
  Variable bias() const { return options_.bias() ? own_parameter("bias") : Variable(); }  // undefined without bias

 private:
  LinearOptions options_;
};

}  // namespace headlab::layers

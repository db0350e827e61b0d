// Softmax over one axis, as a module (no parameters).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "layers/module.h"

namespace headlab::layers {

struct SoftmaxOptions {
  int64_t axis = -1;
};

class Softmax : public Module {
 public:
  explicit Softmax(const SoftmaxOptions& options = {}) : options_(options) {}
  // The constructor every layer has; Softmax has no parameters to draw or type.
  Softmax(const SoftmaxOptions& options, core::Generator& /*gen*/, DType /*dtype*/ = DType::f32)
      : options_(options) {}

  // x -> exp(x) / sum(exp(x)) along the axis; entries of -inf give exactly 0.
  Variable forward(const Variable& x) const;

  const SoftmaxOptions& options() const { return options_; }

 private:
  SoftmaxOptions options_;
};

}  // namespace headlab::layers

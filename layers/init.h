// The one initialization scheme of headlab's layers (documented in
// docs/model.md): weights of Linear and Embedding ~ N(0, 0.02), biases 0,
// LayerNorm weight 1 and bias 0. Each draw happens when the parameter is
// registered, so a seed fixes every weight through the registration order.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace headlab::layers {

inline constexpr double kInitStddev = 0.02;

inline core::Tensor init_normal_weight(const core::Shape& shape, core::Generator& gen, core::DType dtype) {
  return gen.normal(shape, 0.0, kInitStddev, dtype);
}

}  // namespace headlab::layers

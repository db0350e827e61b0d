#include "layers/linear.h"

#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "layers/init.h"

namespace headlab::layers {

Linear::Linear(const LinearOptions& options, core::Generator& gen, DType dtype) : options_(options) {
  if (options.in_features <= 0 || options.out_features <= 0) {
    throw std::invalid_argument("Linear: in_features and out_features must be positive, got in_features=" +
                                std::to_string(options.in_features) +
                                ", out_features=" + std::to_string(options.out_features));
  }
  register_parameter("weight",
                               init_normal_weight({options.out_features, options.in_features}, gen, dtype));
  if (options.bias) register_parameter("bias", Tensor::zeros({options.out_features}, dtype));
}

Variable Linear::forward(const Variable& x) const {
  const int64_t in = options_.in_features;
  if (x.dim() < 1 || x.size(-1) != in) {
    throw std::invalid_argument("Linear::forward: input " + core::to_string(x.shape()) +
                                " does not end in in_features=" + std::to_string(in) + " (expected [..., " +
                                std::to_string(in) + "])");
  }
  // One GEMM over all leading axes, [N, in] @ [in, out], starting from the bias.
  return autograd::linear(x, weight(), options_.bias ? bias() : Variable());
}

}  // namespace headlab::layers

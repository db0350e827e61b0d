#include "layers/layer_norm.h"

#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/shortest.h"

namespace headlab::layers {

LayerNorm::LayerNorm(const LayerNormOptions& options, core::Generator& /*gen: LayerNorm's init is not random*/,
                     DType dtype)
    : options_(options) {
  if (options.normalized_size <= 0 || !(options.eps > 0.0)) {
    throw std::invalid_argument("LayerNorm: normalized_size must be positive and eps > 0, got normalized_size=" +
                                std::to_string(options.normalized_size) + ", eps=" + core::shortest(options.eps));
  }
  register_parameter("weight", Tensor::ones({options.normalized_size}, dtype));
  register_parameter("bias", Tensor::zeros({options.normalized_size}, dtype));
}

namespace {

void check_last_axis(const Variable& x, int64_t d, const char* who) {
  if (x.dim() < 1 || x.size(-1) != d) {
    throw std::invalid_argument(std::string(who) + ": input " + core::to_string(x.shape()) +
                                " does not end in normalized_size=" + std::to_string(d));
  }
}

}  // namespace

Variable LayerNorm::forward(const Variable& x) const {
  check_last_axis(x, options_.normalized_size, "LayerNorm::forward");
  return autograd::layer_norm(x, weight(), bias(), options_.eps);
}

autograd::AddLayerNorm LayerNorm::forward_sum(const Variable& a, const Variable& b) const {
  check_last_axis(a, options_.normalized_size, "LayerNorm::forward_sum");
  return autograd::add_layer_norm(a, b, weight(), bias(), options_.eps);
}

}  // namespace headlab::layers

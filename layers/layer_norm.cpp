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

Variable LayerNorm::forward(const Variable& x, const HookScope& hooks) const {
  check_last_axis(x, options_.normalized_size, "LayerNorm::forward");
  const Variable out = hooks.wants("hook_scale") ? forward_scale_hooked(x, hooks)
                                                 : autograd::layer_norm(x, weight(), bias(), options_.eps);
  return hooks.visit("hook_normalized", out);
}

Variable LayerNorm::forward_scale_hooked(const Variable& x, const HookScope& hooks) const {
  using namespace autograd;
  // The composed equations, so that a scale the hook replaces (or adds a
  // delta to, for its gradient) is the one the output divides by; the
  // gradient reaches x through the mean and the scale as through the fused op.
  const Variable centered = x - mean(x, {-1}, /*keepdim=*/true);
  const Variable scale = sqrt(mean(centered * centered, {-1}, /*keepdim=*/true) + options_.eps);
  const Variable given = hooks.visit_side("hook_scale", scale);
  // Kept: the fused op, whose bits a pass without the hook has.
  if (given.node() == scale.node()) return layer_norm(x, weight(), bias(), options_.eps);
  return centered / given * weight() + bias();
}

autograd::AddLayerNorm LayerNorm::forward_sum(const Variable& a, const Variable& b) const {
  check_last_axis(a, options_.normalized_size, "LayerNorm::forward_sum");
  return autograd::add_layer_norm(a, b, weight(), bias(), options_.eps);
}

}  // namespace headlab::layers

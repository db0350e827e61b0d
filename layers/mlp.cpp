#include "layers/mlp.h"

#include "autograd/ops.h"

namespace headlab::layers {

MLP::MLP(const MLPOptions& options, core::Generator& gen, DType dtype) : options_(options) {
  fc1_ = register_module("fc1", std::make_shared<Linear>(LinearOptions{.in_features = options.d_model, .out_features = options.d_ff}, gen, dtype));
  fc2_ = register_module("fc2", std::make_shared<Linear>(LinearOptions{.in_features = options.d_ff, .out_features = options.d_model}, gen, dtype));
}

// fc1 and GELU run as one node (autograd::linear_gelu): the same numbers as
// gelu(fc1(x)), with one pass less in the backward. Hooks that want fc1's
// output or GELU's get the two-node form (the same bits).
Variable MLP::forward(const Variable& x, const HookScope& hooks) const {
  const bool want_pre = hooks.wants("hook_pre");
  const bool want_post = hooks.wants("hook_post");
  if (!options_.relu && !want_pre && !want_post)
    return fc2_->forward(autograd::linear_gelu(x, fc1_->weight(), fc1_->bias()));
  const Variable pre = fc1_->forward(x);
  const Variable h = want_pre ? hooks.visit_wanted("hook_pre", pre) : pre;
  const Variable post = options_.relu ? autograd::relu(h) : autograd::gelu(h);
  return fc2_->forward(want_post ? hooks.visit_wanted("hook_post", post) : post);
}

}  // namespace headlab::layers

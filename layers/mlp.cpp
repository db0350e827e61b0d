#include "layers/mlp.h"

#include "autograd/ops.h"

namespace headlab::layers {

MLP::MLP(const MLPOptions& options, core::Generator& gen, DType dtype) : options_(options) {
  fc1_ = register_module("fc1", std::make_shared<Linear>(LinearOptions{.in_features = options.d_model, .out_features = options.d_ff}, gen, dtype));
  fc2_ = register_module("fc2", std::make_shared<Linear>(LinearOptions{.in_features = options.d_ff, .out_features = options.d_model}, gen, dtype));
}

// fc1 and GELU run as one node (autograd::linear_gelu): the same numbers as
// gelu(fc1(x)), with one pass less in the backward.
Variable MLP::forward(const Variable& x) const {
  if (options_.relu) return fc2_->forward(autograd::relu(fc1_->forward(x)));
  return fc2_->forward(autograd::linear_gelu(x, fc1_->weight(), fc1_->bias()));
}

}  // namespace headlab::layers

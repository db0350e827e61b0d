#include "layers/mlp.h"

#include "autograd/ops.h"

namespace headlab::layers {

MLP::MLP(const MLPOptions& options, core::Generator& gen, DType dtype) : options_(options) {
  fc1_ = register_module("fc1", std::make_shared<Linear>(LinearOptions(options.d_model(), options.d_ff()), gen, dtype));
  fc2_ = register_module("fc2", std::make_shared<Linear>(LinearOptions(options.d_ff(), options.d_model()), gen, dtype));
}

Variable MLP::forward(const Variable& x) const { return fc2_->forward(autograd::gelu(fc1_->forward(x))); }

}  // namespace headlab::layers

#include "layers/softmax.h"

#include "autograd/ops.h"

namespace headlab::layers {

Variable Softmax::forward(const Variable& x) const { return autograd::softmax(x, options_.axis); }

}  // namespace headlab::layers

// For backward closures: a gradient gathered so far that a backward may add
// its own gradient into, in its own pass over memory.
#pragma once

#include "autograd/variable.h"

namespace headlab::autograd {

// v's gradient so far if a backward may add its own into it in place, else
// undefined: v is an op's result still in the graph (a leaf's gradient may be
// held by an optimizer or a caller), its gradient is contiguous and no other
// tensor shares that gradient's storage. A backward that writes g into it in
// its own pass (core::layer_norm_backward_into) gives the bits of
// v.accumulate_grad(g) without writing g apart and adding it out of place.
Tensor grad_to_add_into(const Variable& v);

}  // namespace headlab::autograd

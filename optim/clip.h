// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <vector>

#include "autograd/variable.h"

namespace headlab::optim {

// The L2 norm of all gradients together (parameters without a gradient are
// skipped), accumulated in double. If it exceeds max_norm, every gradient is
// multiplied in place by max_norm / (norm + 1e-6). Returns the norm before
// clipping. A non-finite norm is returned without touching the gradients, so
// that the caller can stop on it. The result does not depend on the thread
// count. Throws std::invalid_argument unless max_norm is finite and > 0.
double clip_grad_norm(const std::vector<autograd::Variable>& params, double max_norm);

// The same global norm, without clipping.
double grad_norm(const std::vector<autograd::Variable>& params);

}  // namespace headlab::optim

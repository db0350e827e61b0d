// The layers' entries for `headlab gradcheck` and the tests: every layer, and
// whole transformers' cross-entropy loss, checked in float64 against finite
// differences with respect to their inputs and every parameter.
#pragma once

#include <vector>

#include "autograd/gradcheck.h"

namespace headlab::layers {

const std::vector<autograd::GradcheckCase>& layers_gradcheck_cases();

}  // namespace headlab::layers

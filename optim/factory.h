// Choosing an optimizer by name (the CLI's --optimizer).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "optim/optimizer.h"

namespace headlab::optim {

// "sgd", "adam" or "adamw" with PyTorch's defaults but for lr; each group's
// weight decay is its own or, if unset, the optimizer's default (0 for SGD
// and Adam, 0.01 for AdamW). An unknown name throws std::invalid_argument
// naming the valid ones.
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, std::vector<ParamGroup> groups, double lr);

}  // namespace headlab::optim

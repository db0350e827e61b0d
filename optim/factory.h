// Choosing an optimizer by name (the CLI's --optimizer).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "optim/optimizer.h"

namespace headlab::optim {

// Adam's and AdamW's betas and eps (PyTorch's defaults); SGD ignores them.
struct AdamSettings {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// "sgd", "adam" or "adamw" with PyTorch's defaults but for lr (and `adam`);
// each group's weight decay is its own or, if unset, the optimizer's default
// (0 for SGD and Adam, 0.01 for AdamW). An unknown name throws
// std::invalid_argument naming the valid ones.
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, std::vector<ParamGroup> groups, double lr,
                                          const AdamSettings& adam = {});

}  // namespace headlab::optim

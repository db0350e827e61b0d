// Parameter groups: named parameters that share optimizer settings.
//
// An optimizer works over groups; each group may override the weight decay
// and scale the optimizer's learning rate. Names are the dotted names that
// layers::Module::named_parameters() returns; they name the optimizer state
// in checkpoints too.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace headlab::optim {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;

struct ParamGroup {
  NamedParameters params;
  // Unset: the optimizer's default weight decay.
  std::optional<double> weight_decay;
  // This group's learning rate is lr_scale times the optimizer's lr, so a
  // schedule that sets the lr keeps the groups' ratios.
  double lr_scale = 1.0;
};

// Names "0", "1", ... for parameters that come without names.
NamedParameters name_by_index(const std::vector<autograd::Variable>& params);

// True for parameters that conventionally get no weight decay: biases
// (name ending in ".bias"), LayerNorm parameters (a dotted component starting
// with "ln" or containing "norm", as in blocks.0.ln1.weight or ln_f.weight)
// and any tensor with fewer than two dimensions.
bool is_no_decay_parameter(const std::string& name, const autograd::Variable& param);

// One group with `weight_decay`; or, when no_decay_for_bias_and_norm is set,
// a group with `weight_decay` and a group with weight decay 0 holding the
// parameters is_no_decay_parameter() selects. Empty groups are left out;
// parameters keep their order inside a group.
std::vector<ParamGroup> make_param_groups(const NamedParameters& named_params, double weight_decay,
                                          bool no_decay_for_bias_and_norm);

}  // namespace headlab::optim

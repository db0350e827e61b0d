#include "optim/optimizer.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "core/shortest.h"

namespace headlab::optim {

Optimizer::Optimizer(std::string kind, std::vector<ParamGroup> groups, double lr, double default_weight_decay)
    : kind_(std::move(kind)), groups_(std::move(groups)) {
  set_lr(lr);
  check_hyperparameter("weight_decay", default_weight_decay);
  std::set<std::string> names;
  std::set<const autograd::Node*> nodes;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    const std::string where = "optim::" + kind_ + ": parameter group " + std::to_string(g);
    if (!group.weight_decay) group.weight_decay = default_weight_decay;
    if (!std::isfinite(*group.weight_decay) || *group.weight_decay < 0.0) {
      throw std::invalid_argument(where + ": weight_decay must be finite and >= 0, got " + core::shortest(*group.weight_decay));
    }
    if (!std::isfinite(group.lr_scale) || group.lr_scale <= 0.0) {
      throw std::invalid_argument(where + ": lr_scale must be finite and > 0, got " + core::shortest(group.lr_scale));
    }
    GroupInfo info{.members = {}, .lr_scale = group.lr_scale, .weight_decay = *group.weight_decay};
    for (const auto& [name, param] : group.params) {
      if (name.empty()) throw std::invalid_argument(where + ": a parameter has an empty name");
      if (!param.defined()) throw std::invalid_argument(where + ": parameter '" + name + "' is undefined");
      if (!names.insert(name).second) {
        throw std::invalid_argument(where + ": the name '" + name + "' is used twice; names must be unique");
      }
      if (!nodes.insert(param.node()).second) {
        throw std::invalid_argument(where + ": parameter '" + name +
                                    "' is already in this optimizer under another name");
      }
      info.members.push_back(params_.size());
      params_.push_back(ParamState{.name = name, .param = param, .steps = 0, .slots = {}});
    }
    group_info_.push_back(std::move(info));
  }
  if (params_.empty()) throw std::invalid_argument("optim::" + kind_ + ": got an empty parameter list");
}

void Optimizer::check_hyperparameter(const char* what, double value) const {
  if (!std::isfinite(value) || value < 0.0) {
    throw std::invalid_argument("optim::" + kind_ + ": " + what + " must be finite and >= 0, got " + core::shortest(value));
  }
}

void Optimizer::set_lr(double lr) {
  check_hyperparameter("lr", lr);
  lr_ = lr;
}

int64_t Optimizer::param_step_count(const std::string& name) const {
  for (const ParamState& s : params_) {
    if (s.name == name) return s.steps;
  }
  throw std::invalid_argument("optim::" + kind_ + "::param_step_count: no parameter named '" + name + "'");
}

std::vector<autograd::Variable> Optimizer::parameters() const {
  std::vector<autograd::Variable> out;
  out.reserve(params_.size());
  for (const ParamState& s : params_) out.push_back(s.param);
  return out;
}

void Optimizer::zero_grad() {
  for (ParamState& s : params_) s.param.zero_grad();
}

void Optimizer::step() {
  autograd::NoGradGuard no_grad;
  // Check every gradient first, so that a bad one leaves all parameters as they were.
  for (const ParamState& s : params_) {
    if (!s.param.has_grad()) continue;
    const core::Tensor& value = s.param.value();
    const core::Tensor& grad = s.param.grad();
    if (grad.shape() != value.shape() || grad.dtype() != value.dtype()) {
      throw std::invalid_argument("optim::" + kind_ + "::step: parameter '" + s.name + "' is " +
                                  core::to_string(value.dtype()) + " " + core::to_string(value.shape()) +
                                  " but its gradient is " + core::to_string(grad.dtype()) + " " +
                                  core::to_string(grad.shape()) + "; they must match");
    }
  }
  for (const GroupInfo& group : group_info_) {
    for (std::size_t i : group.members) {
      if (params_[i].param.has_grad()) update_one(params_[i], group);
    }
  }
  ++step_count_;
}

void Optimizer::update_one(ParamState& state, const GroupInfo& group) {
  const core::Tensor grad = state.param.grad().contiguous();
  core::Tensor& value = state.param.mutable_value();
  const UpdateArgs args{.lr = lr_ * group.lr_scale, .weight_decay = group.weight_decay};
  ++state.steps;
  if (value.is_contiguous()) {
    update(state, value, grad, args);
  } else {
    // Update a contiguous copy and write it back into the strided parameter.
    core::Tensor work = value.contiguous();
    update(state, work, grad, args);
    value.copy_(work);
  }
}

}  // namespace headlab::optim

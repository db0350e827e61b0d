#include "optim/optimizer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "core/shortest.h"
#include "core/threads.h"

namespace headlab::optim {

// A prepared update, and where its result goes when the parameter is strided.
struct Optimizer::Pending {
  ElementwiseUpdate update;
  core::Tensor strided;  // the parameter, when `work` stands in for it
  core::Tensor work;     // its contiguous copy, written back after the update
  core::Tensor grad;     // kept alive until the update has run
};

namespace {

// Runs every update over the concatenation of their elements in one parallel
// region (one fork and join per step, not one per parameter). Each thread
// takes a fixed share of the elements; which thread updates an element never
// changes what the element becomes.
template <class Update>
void run_all(const std::vector<Update>& pending) {
  int64_t total = 0;
  for (const Update& p : pending) total += p.update.numel;
  const auto run_range = [&](int64_t begin, int64_t end) {
    int64_t offset = 0;
    for (const Update& p : pending) {
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + p.update.numel);
      if (lo < hi) p.update.apply(lo - offset, hi - offset);
      offset += p.update.numel;
    }
  };
  if (total < core::kParallelGrain) {
    run_range(0, total);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    run_range(total * t / nt, total * (t + 1) / nt);
  }
}

}  // namespace

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
  std::vector<Pending> pending;
  for (const GroupInfo& group : group_info_) {
    for (std::size_t i : group.members) {
      if (params_[i].param.has_grad()) pending.push_back(prepare_one(params_[i], group));
    }
  }
  run_all(pending);
  for (Pending& p : pending) {
    if (p.strided.defined()) p.strided.copy_(p.work);
  }
  ++step_count_;
}

Optimizer::Pending Optimizer::prepare_one(ParamState& state, const GroupInfo& group) {
  Pending out;
  out.grad = state.param.grad().contiguous();
  core::Tensor& value = state.param.mutable_value();
  const UpdateArgs args{.lr = lr_ * group.lr_scale, .weight_decay = group.weight_decay};
  ++state.steps;
  if (value.is_contiguous()) {
    out.update = prepare(state, value, out.grad, args);
  } else {
    // Update a contiguous copy, written back into the strided parameter after the update.
    out.strided = value;
    out.work = value.contiguous();
    out.update = prepare(state, out.work, out.grad, args);
  }
  return out;
}

}  // namespace headlab::optim

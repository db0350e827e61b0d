// optim::Optimizer: the common machinery of SGD, Adam and AdamW.
//
// An optimizer holds parameter groups (optim/param_groups.h) and, for each
// parameter, its own step count and state tensors ("slots": momentum_buffer,
// exp_avg, exp_avg_sq), created on the parameter's first update. step()
// updates, under autograd::NoGradGuard, every parameter that has a gradient
// and skips the others (their step counts stay, as in PyTorch).
//
// The state is exported for checkpoints and imported back after checking
// that it fits these parameters exactly:
//   tensors   "optimizer.<param name>.<slot>", the parameter's shape and dtype,
//             for every parameter that has taken a step
//   metadata  "optimizer.kind" (sgd | adam | adamw), "optimizer.format" (1),
//             "optimizer.step" (calls of step()), "optimizer.lr" (exact
//             decimal), "optimizer.<param name>.step" (that parameter's updates)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/safetensors.h"
#include "optim/param_groups.h"

namespace headlab::optim {

struct OptimizerState {
  core::NamedTensors tensors;
  core::Metadata metadata;
};

class Optimizer {
 public:
  // One parameter's update, element by element: apply(lo, hi) updates
  // elements [lo, hi) of the parameter (and its slots). Every element is
  // independent of the others, so step() runs the updates of all parameters
  // in one parallel region, split by element counts alone.
  struct ElementwiseUpdate {
    int64_t numel = 0;
    std::function<void(int64_t lo, int64_t hi)> apply;
  };

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  void step();
  // Drops every parameter's gradient (PyTorch's set_to_none).
  void zero_grad();

  // The base learning rate; group g uses lr() * its lr_scale.
  double lr() const { return lr_; }
  void set_lr(double lr);

  // Calls of step() so far.
  int64_t step_count() const { return step_count_; }
  // Updates a parameter has received (it is skipped while it has no gradient).
  int64_t param_step_count(const std::string& name) const;

  // "sgd", "adam" or "adamw": stored with the state and checked on import.
  const std::string& kind() const { return kind_; }

  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Every parameter, group by group (for clip_grad_norm).
  std::vector<autograd::Variable> parameters() const;

  OptimizerState export_state() const;
  // Accepts a whole checkpoint: tensors and metadata keys that do not start
  // with "optimizer." are ignored. Throws std::invalid_argument, changing
  // nothing, if the state is of another kind, misses a tensor, has one of the
  // wrong shape or dtype, or names a parameter this optimizer does not have.
  void import_state(const core::NamedTensors& tensors, const core::Metadata& metadata);
  void import_state(const OptimizerState& state) { import_state(state.tensors, state.metadata); }

 protected:
  // Per-parameter bookkeeping, seen by the update rules.
  struct ParamState {
    std::string name;
    autograd::Variable param;
    int64_t steps = 0;                // updates so far, including the one in progress
    std::vector<core::Tensor> slots;  // as slot_names(); empty before the first update
  };
  // What one update of one parameter uses.
  struct UpdateArgs {
    double lr;            // this group's learning rate
    double weight_decay;  // this group's weight decay
  };

  // Checks the groups: defined, uniquely named, distinct parameters; lr and
  // weight decays finite and >= 0, lr_scale finite and > 0.
  Optimizer(std::string kind, std::vector<ParamGroup> groups, double lr, double default_weight_decay);

  // Names of the per-parameter state tensors, in the order of ParamState::slots.
  virtual std::vector<std::string> slot_names() const = 0;
  // Whether a slot holds values that are never negative (Adam's second
  // moments): import_state refuses a state with a negative one.
  virtual bool slot_is_non_negative(const std::string& slot) const {
    (void)slot;
    return false;
  }
  // Creates the slots on the first update and returns the update of param,
  // which step() applies later: the pointers it captures (param, grad, the
  // slots) stay valid until then. param and grad are contiguous and of equal
  // shape and dtype; state.steps already counts this update.
  virtual ElementwiseUpdate prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                                    const UpdateArgs& args) = 0;

  // Throws std::invalid_argument naming the optimizer unless value is finite and >= 0.
  void check_hyperparameter(const char* what, double value) const;

 private:
  struct GroupInfo {
    std::vector<std::size_t> members;  // indices into params_
    double lr_scale = 1.0;
    double weight_decay = 0.0;
  };
  struct Pending;
  Pending prepare_one(ParamState& state, const GroupInfo& group);

  std::string kind_;
  std::vector<ParamGroup> groups_;  // weight_decay always set (resolved)
  std::vector<GroupInfo> group_info_;
  std::vector<ParamState> params_;
  double lr_ = 0.0;
  int64_t step_count_ = 0;
};

}  // namespace headlab::optim

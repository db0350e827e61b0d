// Stochastic gradient descent with momentum, dampening, Nesterov momentum and
// L2 weight decay, by PyTorch's torch.optim.SGD formulas. With g the gradient:
//
//   g = g + weight_decay * p
//   b = g on the first step, else momentum * b + (1 - dampening) * g
//   g = g + momentum * b  (Nesterov)  or  g = b  (otherwise; only if momentum != 0)
//   p = p - lr * g
#pragma once

#include "optim/optimizer.h"

namespace headlab::optim {

class SGDOptions {
 public:
  explicit SGDOptions(double lr = 0.01) : lr_(lr) {}
  // clang-format off
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  bool nesterov() const { return nesterov_; }
  double weight_decay() const { return weight_decay_; }
  // clang-format on

 private:
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  bool nesterov_ = false;
  double weight_decay_ = 0.0;  // default for groups that do not set their own
};

class SGD final : public Optimizer {
 public:
  // Throws std::invalid_argument for a negative or non-finite setting, or
  // Nesterov without momentum or with dampening (as PyTorch does).
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options = SGDOptions());
  SGD(const NamedParameters& params, const SGDOptions& options = SGDOptions());
  SGD(const std::vector<autograd::Variable>& params, const SGDOptions& options = SGDOptions());

  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  ElementwiseUpdate prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                            const UpdateArgs& args) override;

 private:
  SGDOptions options_;
};

}  // namespace headlab::optim

// Adam and AdamW by PyTorch's torch.optim.Adam / AdamW formulas. At step t,
// with g the gradient:
//
//   Adam:   g = g + weight_decay * p            (L2 penalty in the gradient)
//   AdamW:  p = p - lr * weight_decay * p       (decoupled, before the update)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr * m_hat / (sqrt(v_hat) + eps),  m_hat = m / (1 - beta1^t),
//                                              v_hat = v / (1 - beta2^t)
//
// Defaults are PyTorch's: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight
// decay 0 for Adam and 0.01 for AdamW. The state slots are exp_avg (m) and
// exp_avg_sq (v).
#pragma once

#include "optim/optimizer.h"

namespace headlab::optim {

// The settings both share; Self is the concrete options type, so that the
// chained setters keep it (AdamWOptions().lr(3e-4).weight_decay(0.1)).
template <class Self>
class AdamOptionsBase {
 public:
  // clang-format off
  Self& lr(double v) { lr_ = v; return self(); }
  Self& betas(double beta1, double beta2) { beta1_ = beta1; beta2_ = beta2; return self(); }
  Self& eps(double v) { eps_ = v; return self(); }
  Self& weight_decay(double v) { weight_decay_ = v; return self(); }
  double lr() const { return lr_; }
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  // clang-format on

 protected:
  explicit AdamOptionsBase(double lr, double weight_decay) : lr_(lr), weight_decay_(weight_decay) {}

 private:
  Self& self() { return static_cast<Self&>(*this); }
  double lr_;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_;  // default for groups that do not set their own
};

class AdamOptions : public AdamOptionsBase<AdamOptions> {
 public:
  explicit AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.0) {}
};

class AdamWOptions : public AdamOptionsBase<AdamWOptions> {
 public:
  explicit AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.01) {}
};

class Adam final : public Optimizer {
 public:
  // Throws std::invalid_argument for a negative or non-finite setting, or a
  // beta outside [0, 1).
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = AdamOptions());
  Adam(const NamedParameters& params, const AdamOptions& options = AdamOptions());
  Adam(const std::vector<autograd::Variable>& params, const AdamOptions& options = AdamOptions());

  const AdamOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  bool slot_is_non_negative(const std::string& slot) const override { return slot == "exp_avg_sq"; }
  ElementwiseUpdate prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                            const UpdateArgs& args) override;

 private:
  AdamOptions options_;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = AdamWOptions());
  AdamW(const NamedParameters& params, const AdamWOptions& options = AdamWOptions());
  AdamW(const std::vector<autograd::Variable>& params, const AdamWOptions& options = AdamWOptions());

  const AdamWOptions& options() const { return options_; }

 protected:
  std::vector<std::string> slot_names() const override;
  bool slot_is_non_negative(const std::string& slot) const override { return slot == "exp_avg_sq"; }
  ElementwiseUpdate prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                            const UpdateArgs& args) override;

 private:
  AdamWOptions options_;
};

}  // namespace headlab::optim

#include "optim/adam.h"

#include <cmath>
#include <stdexcept>

#include "core/shortest.h"

namespace headlab::optim {

namespace {

struct AdamStep {
  double lr;
  double beta1;
  double beta2;
  double eps;
  double l2;         // Adam's weight decay, added to the gradient
  double decoupled;  // AdamW's weight decay, applied to the parameter
  int64_t t;         // this parameter's step, from 1
};

// p, g, m, v: [n] contiguous; updates elements [lo, hi). Each element is
// independent, so the result does not depend on how [0, n) is split.
template <class T>
void adam_kernel(T* p, const T* g, T* m, T* v, int64_t lo, int64_t hi, const AdamStep& s) {
  const double t = static_cast<double>(s.t);
  const T step_size = static_cast<T>(s.lr / (1.0 - std::pow(s.beta1, t)));
  const T sqrt_bc2 = static_cast<T>(std::sqrt(1.0 - std::pow(s.beta2, t)));
  const T b1 = static_cast<T>(s.beta1);
  const T b2 = static_cast<T>(s.beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - s.beta1);
  const T one_minus_b2 = static_cast<T>(1.0 - s.beta2);
  const T eps = static_cast<T>(s.eps);
  const T l2 = static_cast<T>(s.l2);
  const T shrink = static_cast<T>(1.0 - s.lr * s.decoupled);
  for (int64_t i = lo; i < hi; ++i) {
    // Branch-free so it vectorizes: with l2 = 0 and shrink = 1 these two
    // lines change nothing (for finite p), bit for bit.
    const T d = g[i] + l2 * p[i];
    const T x = p[i] * shrink;
    const T mi = b1 * m[i] + one_minus_b1 * d;
    const T vi = b2 * v[i] + one_minus_b2 * d * d;
    m[i] = mi;
    v[i] = vi;
    p[i] = x - step_size * mi / (std::sqrt(vi) / sqrt_bc2 + eps);
  }
}

void check_betas(const char* who, double beta1, double beta2) {
  for (const double b : {beta1, beta2}) {
    if (!(b >= 0.0 && b < 1.0)) {
      throw std::invalid_argument(std::string("optim::") + who + ": betas must lie in [0, 1), got (" +
                                  core::shortest(beta1) + ", " + core::shortest(beta2) + ")");
    }
  }
}

// The moments start at zero on a parameter's first update.
void ensure_moments(std::vector<core::Tensor>& slots, const core::Tensor& param) {
  if (!slots.empty()) return;
  slots.push_back(core::Tensor::zeros(param.shape(), param.dtype()));
  slots.push_back(core::Tensor::zeros(param.shape(), param.dtype()));
}

Optimizer::ElementwiseUpdate adam_update(std::vector<core::Tensor>& slots, core::Tensor& param,
                                         const core::Tensor& grad, const AdamStep& s) {
  ensure_moments(slots, param);
  return core::dispatch(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return Optimizer::ElementwiseUpdate{
        .numel = param.numel(),
        .apply = [p = param.data<T>(), g = grad.data<T>(), m = slots[0].data<T>(), v = slots[1].data<T>(),
                  s](int64_t lo, int64_t hi) { adam_kernel<T>(p, g, m, v, lo, hi, s); }};
  });
}

ParamGroup single_group(const NamedParameters& params) {
  return ParamGroup{.params = params, .weight_decay = {}, .lr_scale = 1.0};
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Optimizer("adam", std::move(groups), options.lr(), options.weight_decay()), options_(options) {
  check_betas("Adam", options.beta1(), options.beta2());
  check_hyperparameter("eps", options.eps());
}

Adam::Adam(const NamedParameters& params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{single_group(params)}, options) {}

Adam::Adam(const std::vector<autograd::Variable>& params, const AdamOptions& options)
    : Adam(name_by_index(params), options) {}

std::vector<std::string> Adam::slot_names() const { return {"exp_avg", "exp_avg_sq"}; }

Optimizer::ElementwiseUpdate Adam::prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                                         const UpdateArgs& args) {
  return adam_update(state.slots, param, grad,
           AdamStep{.lr = args.lr,
                    .beta1 = options_.beta1(),
                    .beta2 = options_.beta2(),
                    .eps = options_.eps(),
                    .l2 = args.weight_decay,
                    .decoupled = 0.0,
                    .t = state.steps});
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Optimizer("adamw", std::move(groups), options.lr(), options.weight_decay()), options_(options) {
  check_betas("AdamW", options.beta1(), options.beta2());
  check_hyperparameter("eps", options.eps());
}

AdamW::AdamW(const NamedParameters& params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{single_group(params)}, options) {}

AdamW::AdamW(const std::vector<autograd::Variable>& params, const AdamWOptions& options)
    : AdamW(name_by_index(params), options) {}

std::vector<std::string> AdamW::slot_names() const { return {"exp_avg", "exp_avg_sq"}; }

Optimizer::ElementwiseUpdate AdamW::prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                                         const UpdateArgs& args) {
  return adam_update(state.slots, param, grad,
           AdamStep{.lr = args.lr,
                    .beta1 = options_.beta1(),
                    .beta2 = options_.beta2(),
                    .eps = options_.eps(),
                    .l2 = 0.0,
                    .decoupled = args.weight_decay,
                    .t = state.steps});
}

}  // namespace headlab::optim

#include "optim/sgd.h"

#include <stdexcept>


namespace headlab::optim {

namespace {

struct SGDStep {
  double lr;
  double weight_decay;
  double momentum;
  double dampening;
  bool nesterov;
  bool first;  // the momentum buffer starts as the first (decayed) gradient
};

// p, g, buf: [n] contiguous (buf unused without momentum); updates elements
// [lo, hi). Each element is independent, so the result does not depend on how
// [0, n) is split.
template <class T>
void sgd_kernel(T* p, const T* g, T* buf, int64_t lo, int64_t hi, const SGDStep& s) {
  const T lr = static_cast<T>(s.lr);
  const T wd = static_cast<T>(s.weight_decay);
  const T mom = static_cast<T>(s.momentum);
  const T keep = static_cast<T>(1.0 - s.dampening);
  const bool use_momentum = s.momentum != 0.0;
  for (int64_t i = lo; i < hi; ++i) {
    T d = g[i];
    if (wd != T(0)) d += wd * p[i];
    if (use_momentum) {
      const T b = s.first ? d : mom * buf[i] + keep * d;
      buf[i] = b;
      d = s.nesterov ? d + mom * b : b;
    }
    p[i] -= lr * d;
  }
}

}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer("sgd", std::move(groups), options.lr(), options.weight_decay()), options_(options) {
  check_hyperparameter("momentum", options.momentum());
  check_hyperparameter("dampening", options.dampening());
  if (options.nesterov() && (options.momentum() <= 0.0 || options.dampening() != 0.0)) {
    throw std::invalid_argument("optim::SGD: Nesterov momentum needs momentum > 0 and dampening 0, got momentum " +
                                std::to_string(options.momentum()) + " and dampening " +
                                std::to_string(options.dampening()));
  }
}

SGD::SGD(const NamedParameters& params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = params, .weight_decay = {}, .lr_scale = 1.0}}, options) {}

SGD::SGD(const std::vector<autograd::Variable>& params, const SGDOptions& options)
    : SGD(name_by_index(params), options) {}

std::vector<std::string> SGD::slot_names() const {
  if (options_.momentum() == 0.0) return {};
  return {"momentum_buffer"};
}

Optimizer::ElementwiseUpdate SGD::prepare(ParamState& state, core::Tensor& param, const core::Tensor& grad,
                                          const UpdateArgs& args) {
  const bool use_momentum = options_.momentum() != 0.0;
  const bool first = state.slots.empty();
  if (use_momentum && first) state.slots.push_back(core::Tensor::empty(param.shape(), param.dtype()));
  const SGDStep s{.lr = args.lr,
                  .weight_decay = args.weight_decay,
                  .momentum = options_.momentum(),
                  .dampening = options_.dampening(),
                  .nesterov = options_.nesterov(),
                  .first = first};
  return core::dispatch(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return ElementwiseUpdate{.numel = param.numel(),
                             .apply = [p = param.data<T>(), g = grad.data<T>(),
                                       buf = use_momentum ? state.slots[0].data<T>() : nullptr,
                                       s](int64_t lo, int64_t hi) { sgd_kernel<T>(p, g, buf, lo, hi, s); }};
  });
}

}  // namespace headlab::optim

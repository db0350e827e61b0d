#include "layers/hook_set.h"

#include <functional>
#include <stdexcept>
#include <utility>

#include "autograd/ops.h"

namespace headlab::layers {

namespace {

void check_fits(const std::string& what, const std::string& name, const Tensor& t, const Variable& activation) {
  if (t.defined() && t.shape() == activation.shape() && t.dtype() == activation.dtype()) return;
  throw std::invalid_argument("the " + what + " for hook '" + name + "' is " +
                              (t.defined() ? core::to_string(t.dtype()) + " " + core::to_string(t.shape())
                                           : std::string("undefined")) +
                              "; expected " + core::to_string(activation.dtype()) + " " +
                              core::to_string(activation.shape()));
}

}  // namespace

HookSet::HookSet(const ModelSpec& spec, const std::vector<std::string>& cache, std::map<std::string, Tensor> replace,
                 std::map<std::string, Variable> deltas, Hooks* first)
    : keep_(cache.begin(), cache.end()), replace_(std::move(replace)), deltas_(std::move(deltas)), first_(first) {
  for (const std::string& n : keep_) check_hook_name(spec, n);
  for (const auto& [n, t] : replace_) check_hook_name(spec, n);
  for (const auto& [n, d] : deltas_) check_hook_name(spec, n);
  // An edit in place by `first` would be checked by nobody: what these hand
  // on is another Variable, which the pass checks against the edited values.
  if (first_)
    for (const std::string& n : hook_names(spec))
      if (first_->wants(n) && first_->may_edit_in_place(n))
        throw std::invalid_argument("the hooks at '" + n + "' may edit the activation in place, which a pass that "
                                    "also records or differentiates there cannot check: hand back another Variable");
}

bool HookSet::wants(const std::string& name) const {
  return keep_.contains(name) || replace_.contains(name) || deltas_.contains(name) ||
         (first_ && first_->wants(name));
}

Variable HookSet::visit(const std::string& name, const Variable& activation) {
  Variable x = first_ && first_->wants(name) ? first_->visit(name, activation) : activation;
  // What does not fit goes back as it is, for the pass to name (layers/hooks.h).
  if (!x.defined() || x.shape() != activation.shape() || x.dtype() != activation.dtype()) return x;
  if (auto r = replace_.find(name); r != replace_.end()) {
    check_fits("replacement", name, r->second, activation);
    x = Variable(r->second);
  }
  if (auto d = deltas_.find(name); d != deltas_.end()) {
    check_fits("delta", name, d->second.defined() ? d->second.value() : Tensor(), activation);
    x = autograd::add(x, d->second);
  }
  if (keep_.contains(name)) cached_[name] = x.value().contiguous();
  return x;
}

namespace {

// The gradients of objective(logits) at the named activations: through x +
// delta with delta a zero leaf under autograd::GradOnlyFor, so the parameters'
// gradients and requires_grad flags are never touched.
std::map<std::string, Tensor> gradients_of(const Transformer& model, std::span<const int32_t> tokens, int64_t batch,
                                           int64_t seq_len, const std::vector<std::string>& names,
                                           const Tensor* padding_mask,
                                           const std::function<Variable(const Variable& logits)>& objective,
                                           Tensor* logits, double* value, Hooks* caller) {
  std::map<std::string, Variable> deltas;
  std::vector<Variable> leaves;
  for (const std::string& n : names) {
    const Variable d(Tensor::zeros(hook_shape(model.spec(), n, batch, seq_len), model.dtype()), true);
    deltas.emplace(n, d);
    leaves.push_back(d);
  }
  HookSet hooks(model.spec(), {}, {}, deltas, caller);
  // Only the deltas require a gradient in this scope: the graph records only
  // what leads to them, and the parameters are never touched.
  autograd::GradOnlyFor only(leaves);
  Probe probe;
  probe.hooks = &hooks;
  const Variable out = model.forward(tokens, batch, seq_len, padding_mask, &probe);
  if (logits) *logits = out.value();
  const Variable l = objective(out);
  if (value) *value = l.value().item();
  std::map<std::string, Tensor> grads;
  if (deltas.empty()) return grads;
  // Without a graph every gradient would read as zero: a wrong answer, not a result.
  if (!l.requires_grad())
    throw std::logic_error("activation_gradients: the loss does not require a gradient (gradients are disabled on "
                           "this thread: called under autograd::NoGradGuard)");
  l.backward();
  for (const auto& [n, d] : deltas) grads[n] = d.has_grad() ? d.grad() : Tensor::zeros(d.shape(), d.dtype());
  return grads;
}

}  // namespace

std::map<std::string, Tensor> activation_gradients(const Transformer& model, std::span<const int32_t> tokens,
                                                   int64_t batch, int64_t seq_len,
                                                   std::span<const int32_t> targets,
                                                   const std::vector<std::string>& names,
                                                   const Tensor* padding_mask, Tensor* logits, double* loss,
                                                   Hooks* hooks) {
  if (static_cast<int64_t>(targets.size()) != batch * seq_len)
    throw std::invalid_argument("activation_gradients: " + std::to_string(targets.size()) +
                                " targets for [batch=" + std::to_string(batch) + ", seq_len=" +
                                std::to_string(seq_len) + "] tokens (one per token, -1 = none)");
  return gradients_of(
      model, tokens, batch, seq_len, names, padding_mask,
      [&](const Variable& out) { return autograd::cross_entropy(out, targets); }, logits, loss, hooks);
}

std::map<std::string, Tensor> activation_gradients(const Transformer& model, std::span<const int32_t> tokens,
                                                   int64_t batch, int64_t seq_len, const LogitsGradient& grad_of_logits,
                                                   const std::vector<std::string>& names,
                                                   const Tensor* padding_mask, Hooks* hooks) {
  const auto seeded = [&](const Variable& out) {
    const Tensor seed = grad_of_logits(out.value());
    if (!seed.defined() || seed.shape() != out.shape() || seed.dtype() != out.value().dtype())
      throw std::invalid_argument("activation_gradients: the gradient at the logits is " +
                                  (seed.defined() ? core::to_string(seed.dtype()) + " " + core::to_string(seed.shape())
                                                  : std::string("undefined")) +
                                  "; expected the logits' " + core::to_string(out.value().dtype()) + " " +
                                  core::to_string(out.shape()));
    // d/dlogits of sum(logits * seed) is the seed: the metric's own gradient.
    return autograd::sum(autograd::mul(out, Variable(seed)));
  };
  return gradients_of(model, tokens, batch, seq_len, names, padding_mask, seeded, nullptr, nullptr, hooks);
}

}  // namespace headlab::layers

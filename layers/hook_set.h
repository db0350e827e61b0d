// Ready-made layers::Hooks: a recorder and patcher (HookSet), and the
// gradient of the loss with respect to named activations
// (activation_gradients). See layers/hooks.h for the names and layouts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "layers/hooks.h"
#include "layers/transformer.h"

namespace headlab::layers {

class HookSet final : public Hooks {
 public:
  // cache: names whose activation is kept (the value that flows downstream,
  // after any replacement); replace: name -> constant of the activation's
  // shape and dtype that replaces it; deltas: name -> a leaf of the
  // activation's shape added to it (x + delta), whose gradient is then
  // dLoss/dactivation. Every name must be one of hook_names(spec):
  // std::invalid_argument naming the nearest valid ones otherwise. `first`
  // (optional, not owned): hooks visited before these at every point they
  // want, whose result is what these replace, add to and cache; they may not
  // edit in place (std::invalid_argument naming the point: hand back another
  // Variable).
  HookSet(const ModelSpec& spec, const std::vector<std::string>& cache, std::map<std::string, Tensor> replace = {},
          std::map<std::string, Variable> deltas = {}, Hooks* first = nullptr);

  bool wants(const std::string& name) const override;
  // It caches, replaces or adds, never writes into an activation: nothing
  // to check of a kept one, and nothing read.
  bool may_edit_in_place(const std::string& /*name*/) const override { return false; }
  // Throws std::invalid_argument naming the expected shape and dtype when a
  // replacement or delta does not fit the activation.
  Variable visit(const std::string& name, const Variable& activation) override;

  // The kept activations of the last pass, by name: contiguous, sharing
  // storage with the pass's own values where they already are (read-only).
  const std::map<std::string, Tensor>& cache() const { return cached_; }
  std::map<std::string, Tensor> take_cache() { return std::move(cached_); }

 private:
  std::set<std::string> keep_;
  std::map<std::string, Tensor> replace_;
  std::map<std::string, Variable> deltas_;
  std::map<std::string, Tensor> cached_;
  Hooks* first_ = nullptr;
};

// dLoss/d(activation) for each of `names`: loss = cross-entropy of the
// logits against `targets` (one per token, -1 = none; the mean over the
// targets that are not -1). Through x + delta with delta a zero leaf under
// autograd::GradOnlyFor, so the parameters' gradients and requires_grad
// flags are never touched. `logits` (optional) receives the logits, `loss`
// the loss. Throws std::invalid_argument for an unknown name, or for
// tokens/targets/mask that do not fit (as Transformer::forward does), and
// std::logic_error when gradients are disabled on this thread (NoGradGuard)
// rather than return zeros. `hooks` (optional): the caller's, visited at
// each point they want before the delta is added (HookSet's `first`): the
// gradients are those of the hooked pass, at what flows on from each point.
std::map<std::string, Tensor> activation_gradients(const Transformer& model, std::span<const int32_t> tokens,
                                                   int64_t batch, int64_t seq_len,
                                                   std::span<const int32_t> targets,
                                                   const std::vector<std::string>& names,
                                                   const Tensor* padding_mask = nullptr, Tensor* logits = nullptr,
                                                   double* loss = nullptr, Hooks* hooks = nullptr);

// d(metric)/d(activation) for each of `names`, for a metric of the caller's
// given by its gradient at the logits: `grad_of_logits` receives the logits
// [B, T, C] once, between the forward and the backward pass, and returns
// dMetric/dlogits of that shape and dtype, which seeds the backward pass (the
// gradient of sum(logits * seed)). Otherwise as above; std::invalid_argument
// when the seed does not fit the logits. What grad_of_logits throws propagates.
using LogitsGradient = std::function<Tensor(const Tensor& logits)>;
std::map<std::string, Tensor> activation_gradients(const Transformer& model, std::span<const int32_t> tokens,
                                                   int64_t batch, int64_t seq_len, const LogitsGradient& grad_of_logits,
                                                   const std::vector<std::string>& names,
                                                   const Tensor* padding_mask = nullptr, Hooks* hooks = nullptr);

}  // namespace headlab::layers

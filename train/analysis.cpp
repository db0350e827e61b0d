#include "train/analysis.h"

#include <cmath>

#include "autograd/ops.h"
#include "train/session.h"

namespace headlab::train {
namespace {

// Restores what analysis touches when it goes out of scope, even on a throw.
class ModelStateGuard {
 public:
  explicit ModelStateGuard(layers::Transformer& model) : model_(model), training_(model.is_training()) {
    for (int64_t l = 0; l < model.num_layers(); ++l) {
      attention_.push_back(model.attention(l).last_attention());
      gates_.push_back(model.attention(l).gates().value().clone());
    }
    for (const auto& p : model.parameters()) requires_grad_.push_back(p.requires_grad());
  }
  ~ModelStateGuard() {
    model_.train(training_);
    for (int64_t l = 0; l < model_.num_layers(); ++l) {
      auto& attn = model_.attention(l);
      attn.gates().mutable_value().copy_(gates_[l]);
      attn.gates().set_requires_grad(false);
      attn.gates().zero_grad();
      attn.restore_last_attention(attention_[l]);
    }
    const auto params = model_.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].set_requires_grad(requires_grad_[i]);
  }
  ModelStateGuard(const ModelStateGuard&) = delete;
  ModelStateGuard& operator=(const ModelStateGuard&) = delete;

 private:
  layers::Transformer& model_;
  bool training_;
  std::vector<core::Tensor> attention_, gates_;
  std::vector<bool> requires_grad_;
};

Batch slice_rows(const Batch& batch, int64_t first, int64_t count) {
  Batch out;
  out.batch = count;
  out.seq_len = batch.seq_len;
  const auto begin = static_cast<std::ptrdiff_t>(first * batch.seq_len);
  const auto end = static_cast<std::ptrdiff_t>((first + count) * batch.seq_len);
  out.tokens.assign(batch.tokens.begin() + begin, batch.tokens.begin() + end);
  out.targets.assign(batch.targets.begin() + begin, batch.targets.begin() + end);
  return out;
}

// Mean over examples of |dL_example / d gate| for every head, layer-major.
std::vector<double> gate_importance(layers::Transformer& model, const Batch& batch, int64_t examples) {
  for (const auto& p : model.parameters()) p.set_requires_grad(false);
  const int64_t L = model.num_layers(), H = model.spec().heads;
  for (int64_t l = 0; l < L; ++l) model.attention(l).gates().set_requires_grad(true);
  std::vector<double> total(static_cast<std::size_t>(L * H), 0.0);
  int64_t used = 0;
  for (int64_t b = 0; b < std::min(examples, batch.batch); ++b) {
    const Batch one = slice_rows(batch, b, 1);
    bool has_target = false;
    for (int32_t t : one.targets) has_target |= t >= 0;
    if (!has_target) continue;
    const auto logits = model.forward(one.tokens, 1, one.seq_len);
    autograd::cross_entropy(logits, one.targets).backward();
    for (int64_t l = 0; l < L; ++l) {
      const auto& gates = model.attention(l).gates();
      for (int64_t h = 0; h < H; ++h) total[static_cast<std::size_t>(l * H + h)] += std::abs(gates.grad().at({h}));
      gates.zero_grad();
    }
    ++used;
  }
  for (double& v : total) v /= static_cast<double>(std::max<int64_t>(used, 1));
  return total;
}

}  // namespace

RunAnalysis analyze_model(layers::Transformer& model, const Batch& batch, const AnalysisOptions& options) {
  ModelStateGuard guard(model);
  model.eval();
  const int64_t L = model.num_layers(), H = model.spec().heads;

  EvalResult base;
  std::vector<core::Tensor> attention;
  {
    base = evaluate(model, batch);
    for (int64_t l = 0; l < L; ++l) attention.push_back(model.attention(l).last_attention().clone());
  }
  RunAnalysis run = analyze_attention(attention, batch.tokens, model.spec().causal, options.labels,
                                      options.example);
  run.loss = base.loss;
  run.accuracy = base.accuracy;

  for (int64_t l = 0; l < L; ++l) {
    core::Tensor gates = model.attention(l).gates().mutable_value();
    for (int64_t h = 0; h < H; ++h) {
      const double saved = gates.at({h});
      gates.set({h}, 0.0);
      const EvalResult ablated = evaluate(model, batch);
      gates.set({h}, saved);
      run.at(l, h).ablation_delta_loss = ablated.loss - base.loss;
      run.at(l, h).ablation_delta_acc = ablated.accuracy - base.accuracy;
    }
  }
  const std::vector<double> importance = gate_importance(model, batch, options.importance_examples);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) run.at(l, h).importance = importance[static_cast<std::size_t>(l * H + h)];
  relabel(run, options.labels);
  return run;
}

}  // namespace headlab::train

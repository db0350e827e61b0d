#include "analysis/analyze_model.h"

#include "analysis/ablation.h"
#include "analysis/circuits.h"
#include "analysis/composition.h"
#include "analysis/importance.h"
#include "analysis/pruning.h"

namespace headlab::analysis {

RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options) {
  const int64_t L = model.num_layers(), H = model.spec().heads;
  layers::Probe probe(L);
  const EvalResult base = evaluate(model, examples, &probe);
  std::vector<core::Tensor> attention;
  for (const layers::LayerProbe& layer : probe.layers) attention.push_back(layer.attention);
  RunAnalysis run =
      analyze_attention(attention, examples.tokens, model.spec().causal, options.labels, options.example);
  run.loss = base.loss;
  run.accuracy = base.accuracy;

  const std::vector<Ablation> ablation = ablate_heads(model, examples, base);
  const std::vector<double> importance = gate_importance(model, examples, options.importance_examples);
  const std::vector<double> margin =
      gate_importance(model, examples, options.importance_examples, ImportanceObjective::margin);
  const std::vector<double> normalized = normalize_per_layer(margin, H);
  const CircuitWeights weights = circuit_weights(model);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const auto i = static_cast<std::size_t>(l * H + h);
      run.at(l, h).ablation_delta_loss = ablation[i].delta_loss;
      run.at(l, h).ablation_delta_acc = ablation[i].delta_accuracy;
      run.at(l, h).importance = importance[i];
      run.at(l, h).importance_margin = margin[i];
      run.at(l, h).importance_normalized = normalized[i];
      run.at(l, h).copying = ov_copying_score(weights, l, h);
    }
  run.composition = composition_scores(weights);
  if (L > 1) run.composition_baseline = composition_baseline(weights.d_model, weights.d_k);
  run.circuits_layernorm_folded = weights.layernorm_folded;
  run.circuits_mlp_ignored = weights.mlp_ignored;
  if (options.pruning) run.pruning = pruning_curve(model, examples, normalized, options.pruning_random_orders);
  relabel(run, options.labels);
  return run;
}

}  // namespace headlab::analysis

#include "analysis/analyze_model.h"

#include "analysis/ablation.h"
#include "analysis/circuits.h"
#include "analysis/composition.h"
#include "analysis/importance.h"
#include "analysis/pruning.h"
#include "analysis/direct_logit.h"
#include "analysis/position_loss.h"
#include "analysis/task_positions.h"
#include "core/gemm.h"

namespace headlab::analysis {

RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options) {
  // Head metrics describe the model, not the arithmetic it trained with: the
  // same weights give the same report under --precision f32 or bf16.
  const core::F32Gemms f32_gemms;
  const int64_t L = model.num_layers(), H = model.spec().heads;
  layers::Probe probe(L);
  core::Tensor logits;
  {
    autograd::NoGradGuard no_grad;
    const core::Tensor mask = examples.padding_mask();
    logits = model.forward(examples.tokens, examples.batch, examples.seq_len, &mask, &probe).value();
  }
  const EvalResult base = score_logits(logits, examples.targets);
  std::vector<core::Tensor> attention;
  for (const layers::LayerProbe& layer : probe.layers) attention.push_back(layer.attention);
  RunAnalysis run = analyze_attention(attention, examples.tokens, model.spec().causal, options.labels,
                                      options.example,
                                      {examples.targets, examples.attend, examples.roles, examples.lengths});
  run.loss = base.loss;
  run.accuracy = base.accuracy;
  run.position_loss = position_loss(logits, examples.targets);
  run.icl_score = icl_score(run.position_loss);

  const std::vector<Ablation> ablation = ablate_heads(model, examples, base);
  const std::vector<double> importance = gate_importance(model, examples, options.importance_examples);
  const std::vector<double> margin =
      gate_importance(model, examples, options.importance_examples, ImportanceObjective::margin);
  const std::vector<double> normalized = normalize_per_layer(margin, H);
  const CircuitWeights weights = circuit_weights(model);
  const std::vector<double> dla = direct_logit_attribution(model, examples);
  for (int64_t l = 0; l < L; ++l) {
    // Only a task with sources: elsewhere an earlier copy is chance, and the
    // "sources" it names mean nothing.
    const std::vector<TaskPositionScores> task =
        examples.sources ? task_position_scores(attention[static_cast<std::size_t>(l)], examples.tokens,
                                                examples.targets, model.spec().causal)
                         : std::vector<TaskPositionScores>(static_cast<std::size_t>(H));
    for (int64_t h = 0; h < H; ++h) {
      const auto i = static_cast<std::size_t>(l * H + h);
      HeadAnalysis& head = run.at(l, h);
      head.ablation_delta_loss = ablation[i].delta_loss;
      head.ablation_delta_acc = ablation[i].delta_accuracy;
      head.importance = importance[i];
      head.importance_margin = margin[i];
      head.importance_normalized = normalized[i];
      head.copying = ov_copying_score(weights, l, h);
      head.task = task[static_cast<std::size_t>(h)];
      head.direct_logit = dla[i];
    }
  }
  run.composition = composition_scores(weights);
  if (L > 1) run.composition_baseline = composition_baseline(weights.d_model, weights.d_k);
  run.circuits_layernorm_folded = weights.layernorm_folded;
  run.circuits_mlp_ignored = weights.mlp_ignored;
  if (options.pruning) run.pruning = pruning_curve(model, examples, normalized, options.pruning_random_orders);
  run.set_ablations = candidate_sets(run, options.labels);
  for (SetAblation& set : run.set_ablations) {
    const Ablation a = ablate_set(model, examples, base, set.heads);
    set.delta_loss = a.delta_loss;
    set.delta_accuracy = a.delta_accuracy;
  }
  if (options.interventions) {
    const std::vector<Ablation> mean = ablate_heads(model, examples, base, AblationKind::mean);
    const std::vector<Ablation> resample = ablate_heads(model, examples, base, AblationKind::resample);
    for (std::size_t i = 0; i < run.heads.size(); ++i) {
      run.heads[i].mean_ablation_delta_loss = mean[i].delta_loss;
      run.heads[i].resample_ablation_delta_loss = resample[i].delta_loss;
    }
    if (!options.corruption.tokens.empty()) {
      const Patching p = patch_heads(model, examples, options.corruption);
      run.patching = PatchingSummary{options.corruption_text, p.clean_loss, p.corrupted_loss};
      for (std::size_t i = 0; i < run.heads.size(); ++i) run.heads[i].patch_restored = p.restored[i];
    }
  }
  relabel(run, options.labels);
  return run;
}

}  // namespace headlab::analysis

#include "analysis/analyze_model.h"

#include "analysis/ablation.h"
#include "analysis/importance.h"

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
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const auto i = static_cast<std::size_t>(l * H + h);
      run.at(l, h).ablation_delta_loss = ablation[i].delta_loss;
      run.at(l, h).ablation_delta_acc = ablation[i].delta_accuracy;
      run.at(l, h).importance = importance[i];
    }
  relabel(run, options.labels);
  return run;
}

}  // namespace headlab::analysis

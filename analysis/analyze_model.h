// Head analysis of a model: attention scores, labels and verdict
// (run_analysis.h), plus what only the model can tell -- ablation and
// gradient importance, the weight-based circuits (copying and composition
// scores) and the pruning curve. Everything goes through probes of the forward pass
// (layers/probe.h): the model is never changed, so this is safe mid-training
// and from several threads.
#pragma once

#include <cstdint>

#include "analysis/evaluate.h"
#include "analysis/run_analysis.h"
#include "layers/transformer.h"

namespace headlab::analysis {

struct AnalysisOptions {
  LabelOptions labels;
  int64_t importance_examples = 64;  // per-example gradients are one backward each
  int64_t example = 0;               // which sequence of the batch the heatmaps show
  // The pruning curve costs (heads + 1) * (1 + random orders) evaluations:
  // worth it for a final report, not at every analysis during training.
  bool pruning = true;
  int64_t pruning_random_orders = 5;
};

// Runs the model on `examples` and analyzes every head.
RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options = {});

}  // namespace headlab::analysis

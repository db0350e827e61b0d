// Head analysis of a model: attention scores, labels and verdict
// (run_analysis.h), plus what only the model can tell -- ablation of heads
// and of sets of heads, gradient importance, the weight-based circuits
// (copying and composition scores), the pruning curve, direct logit
// attribution, the loss by position and, on request, mean and resample
// ablation and activation patching. Everything goes through probes of the forward pass
// (layers/probe.h): the model is never changed, so this is safe mid-training
// and from several threads.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/evaluate.h"
#include "analysis/patching.h"
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
  // Interventions: mean and resample ablation of every head, and, when
  // corruption.tokens is not empty, activation patching of every head from
  // the clean run into the corrupted one (described by corruption_text).
  bool interventions = false;
  Corruption corruption;
  std::string corruption_text;
};

// Runs the model on `examples` and analyzes every head.
RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options = {});

}  // namespace headlab::analysis

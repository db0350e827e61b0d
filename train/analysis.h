// Head analysis of a model: attention scores from head_metrics, plus what
// only the model can tell -- ablation (a head's gate at 0, before W_O) and
// gradient importance (mean |dL/d gate| per example, Michel et al. 2019).
#pragma once

#include "layers/transformer.h"
#include "train/head_labels.h"
#include "train/tasks.h"

namespace headlab::train {

struct AnalysisOptions {
  LabelOptions labels;
  int64_t importance_examples = 64;  // per-example gradients are one backward each
  int64_t example = 0;               // which sequence of the batch the heatmaps show
};

// Runs the model on `batch` in eval mode and analyzes every head. Leaves the
// model exactly as it found it: weights, gradients, gates, train/eval mode
// and each layer's cached attention.
RunAnalysis analyze_model(layers::Transformer& model, const Batch& batch, const AnalysisOptions& options = {});

}  // namespace headlab::train

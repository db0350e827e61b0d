// report.html's snapshot slider: each snapshot's head analysis (apart from
// the snapshot files' names, train/snapshots.cpp, which the fuzzers' copy of
// the train library takes without the analysis).
#include <memory>

#include "analysis/run_analysis.h"
#include "autograd/variable.h"
#include "core/gemm.h"
#include "layers/padding_mask.h"
#include "layers/probe.h"
#include "train/checkpoint.h"
#include "train/run_builder.h"
#include "train/snapshots.h"

namespace headlab::train {

std::vector<analysis::SnapshotView> snapshot_views(const std::string& run_dir, const Batch& eval, int64_t example) {
  const core::F32Gemms f32_gemms;  // the slider shows head analysis: f32 under any --precision (analyze_model.cpp)
  std::vector<analysis::SnapshotView> views;
  for (const int64_t step : snapshot_steps(run_dir)) {
    const std::string path = snapshot_path(run_dir, step);
    const Checkpoint ck = read_checkpoint(path);
    const std::unique_ptr<layers::Transformer> model = load_model(ck, path);
    if (model->spec().max_seq_len < eval.seq_len) continue;  // not this run's model
    layers::Probe probe(model->num_layers());
    {
      autograd::NoGradGuard no_grad;
      const core::Tensor mask = layers::padding_mask(eval.lengths, eval.batch, eval.seq_len);
      (void)model->forward(eval.tokens, eval.batch, eval.seq_len, &mask, &probe);
    }
    std::vector<core::Tensor> attention;
    for (const layers::LayerProbe& layer : probe.layers) attention.push_back(layer.attention);
    analysis::RunAnalysis run = analysis::analyze_attention(attention, eval.tokens, model->spec().causal, {}, example,
                                                            {.lengths = eval.lengths});
    analysis::SnapshotView view{.step = step, .example = std::move(run.example), .labels = {}};
    for (const analysis::HeadAnalysis& h : run.heads) view.labels.push_back(analysis::label_name(h.label));
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace headlab::train

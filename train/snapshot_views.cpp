// report.html's snapshot slider: each snapshot's head analysis (apart from
// the snapshot files' names, train/snapshots.cpp, which the fuzzers' copy of
// the train library takes without the analysis).
#include <memory>

#include "analysis/analyze_model.h"
#include "train/checkpoint.h"
#include "train/run_builder.h"
#include "train/session.h"
#include "train/snapshots.h"

namespace headlab::train {

std::vector<analysis::SnapshotView> snapshot_views(const std::string& run_dir, const Batch& eval, int64_t example) {
  std::vector<analysis::SnapshotView> views;
  for (const int64_t step : snapshot_steps(run_dir)) {
    const std::string path = snapshot_path(run_dir, step);
    const Checkpoint ck = read_checkpoint(path);
    const std::unique_ptr<layers::Transformer> model = load_model(ck, path);
    if (model->spec().max_seq_len < eval.seq_len) continue;  // not this run's model
    // Two layers' attention at a time, as the final analysis holds, not every layer's.
    analysis::RunAnalysis run = analysis::analyze_model_attention(*model, examples_of(eval), {}, example,
                                                                  {.lengths = eval.lengths});
    analysis::SnapshotView view{.step = step, .example = std::move(run.example), .labels = {}};
    for (const analysis::HeadAnalysis& h : run.heads) view.labels.push_back(analysis::label_name(h.label));
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace headlab::train

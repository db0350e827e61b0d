// Head analysis of a model: attention scores, labels and verdict
// (run_analysis.h), plus what only the model can tell -- ablation of heads
// and of sets of heads, gradient importance, the weight-based circuits
// (copying and composition scores), the pruning curve, direct logit
// attribution, the loss by position and, on request, mean and resample
// ablation and activation patching. Everything goes through probes of the forward pass
// (layers/probe.h): the model is never changed, so this is safe mid-training
// and from several threads.
//
// A large set is analyzed in chunks of rows (docs/head-metrics.md, "Analysis
// in chunks"): every measure is a sum or a mean over examples or positions,
// so each chunk adds to the same sums, in the same order, as one batch
// holding them all would; memory is bounded by the chunk, not the set. What
// needs the whole set first -- the labels behind the set ablations, the
// importance order of the pruning curve, mean ablation's mean -- is
// measured in a second pass over the chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/evaluate.h"
#include "analysis/patching.h"
#include "analysis/run_analysis.h"
#include "layers/transformer.h"

namespace headlab::analysis {

// How far an analysis is, after each chunk of each pass.
struct AnalysisProgress {
  int pass = 1, passes = 1;         // the set is read once or twice
  int64_t rows_done = 0, rows = 0;  // in this pass
  double fraction = 0;              // of the whole analysis's work (its forward passes), estimated
};

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
  // Rows analyzed at a time (0: all at once). The numbers do not depend on
  // it but for the forward's float rounding (docs/head-metrics.md).
  int64_t chunk_rows = 0;
  // Called after each chunk of each pass, on the calling thread.
  std::function<void(const AnalysisProgress&)> progress;
};

// What an analysis of a set read in one chunk costs, in forward passes of
// the whole set (a pass that starts at block l of L counts (L - l) / L,
// prefix.h): the clean pass, each head's zero ablation, the pruning curve
// and, with interventions, each head's mean and resample ablation and
// patching. analyze's progress line counts its work in these, and train
// estimates its final analysis's time by them (train/trainer.h). Not in it:
// the set ablations, known once the labels are (set_ablation_passes), and
// the gradient importance (a forward and a backward of each of the first
// importance_examples rows, twice).
double analysis_passes(int64_t layers, int64_t heads, const AnalysisOptions& options);

// The passes of the set ablations `sets` (RunAnalysis::set_ablations) of a
// model of `layers` layers of `heads` heads, in the same measure.
double set_ablation_passes(const std::vector<SetAblation>& sets, int64_t layers, int64_t heads);

// Runs the model on `examples` and analyzes every head.
RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options = {});

// The attention half of analyze_model: analyze_attention (run_analysis.h)
// of the model's attention on `examples` (scores, labels and verdict; no
// ablations), from one forward pass that holds two layers' attention at a
// time, as analyze_model does. In f32 under any --precision. The report's
// snapshot slider runs it on each snapshot.
RunAnalysis analyze_model_attention(const layers::Transformer& model, const Examples& examples,
                                    const LabelOptions& options = {}, int64_t example = 0,
                                    const BatchContext& context = {});

// One chunk of the set analyze_chunks reads.
struct ExampleChunk {
  Examples examples;                        // its rows, with their patterns, the roles and sources
  std::span<const int32_t> corrupted = {};  // its rows' corrupted tokens for patching [rows * T], or none
  std::shared_ptr<const void> storage;      // keeps what the views point into
};

// Rows [first, first + count) of the set, and with `corrupted` their
// corrupted tokens for patching: row b's are row b's (a corruption that
// takes another row's tokens takes them from the whole set, across chunks,
// as corrupting the whole set at once would). Resample ablation reads a
// chunk's donors beyond it one row at a time, without `corrupted`.
using ReadChunk = std::function<ExampleChunk(int64_t first, int64_t count, bool corrupted)>;

// analyze_model over a set of `rows` rows of `lengths` ([rows], or empty:
// every row is full; resample ablation pairs rows by them, donors.h) read
// `options.chunk_rows` at a time through `read` (options.corruption.tokens
// unused: each chunk brings its own).
RunAnalysis analyze_chunks(const layers::Transformer& model, int64_t rows, std::span<const int32_t> lengths,
                           const ReadChunk& read, const AnalysisOptions& options = {});

}  // namespace headlab::analysis

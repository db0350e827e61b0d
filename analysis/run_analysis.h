// The analysis record of a run: every head's scores, label, ablation and
// importance, the head-to-head JS matrix, the verdict and one example's
// attention for heatmaps. It is what heads.json, the terminal table and
// report.html show (docs/head-metrics.md).
//
// The flow: analyze_attention() scores every head from attention tensors,
// labels them and judges the run. The caller may then fill in what needs the
// model -- ablation deltas, gate importance, the unablated loss and accuracy,
// token labels (analyze_model in analyze_model.h does all of it) -- and call
// relabel(), which recomputes labels (sinks need ablation) and the verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/attend.h"
#include "analysis/circuit_records.h"
#include "analysis/head_metrics.h"
#include "analysis/labels.h"
#include "analysis/nesting.h"
#include "analysis/task_positions.h"
#include "analysis/verdict.h"
#include "core/tensor.h"

namespace headlab::analysis {

struct HeadAnalysis {
  int64_t layer = 0, head = 0;
  HeadScores scores;
  Label label = Label::mixed();
  // Filled by the caller when the model is at hand (all absent otherwise):
  std::optional<double> ablation_delta_loss;  // loss(gate = 0) - loss, nats
  std::optional<double> ablation_delta_acc;   // accuracy(gate = 0) - accuracy, fraction
  // Over the examples with a target among the first importance_examples (analyze_model.h):
  std::optional<double> importance;           // mean |dL/d gate| (Michel et al.)
  std::optional<double> importance_margin;    // mean |d margin / d gate|: does not saturate (importance.h)
  std::optional<double> importance_normalized;  // importance_margin / its layer's Euclidean norm
  std::optional<double> copying;              // the OV circuit's copying score (circuits.h)
  TaskPositionScores task;                    // at the positions the targets need (absent without targets)
  std::optional<double> direct_logit;         // direct logit attribution on the correct class, logits
  // Interventions (analyze --patch): the loss change when the head's output
  // is replaced by its batch mean or by another example's, and the share of
  // the clean-vs-corrupted loss gap that patching its clean output restores.
  std::optional<double> mean_ablation_delta_loss, resample_ablation_delta_loss, patch_restored;
};

// Heads ablated together (zero gates): all heads sharing a label (`role` is
// the label), or a candidate circuit (`role` "induction circuit").
struct SetAblation {
  struct Cost {
    double delta_loss = 0, delta_accuracy = 0;
  };
  std::string role;
  std::vector<std::size_t> heads;  // layer-major indices
  double delta_loss = 0, delta_accuracy = 0;
  // Per member, in `heads`' order: the set ablated without that member, which
  // says whether the member adds to the set's cost (the verdict credits only
  // those). Measured for a role's set of three or more heads (ablates_without);
  // empty otherwise: see set_without.
  std::vector<Cost> without;
};

// The corrupted run of activation patching.
struct PatchingSummary {
  std::string corruption;  // how the input was corrupted, one sentence
  double clean_loss = 0, corrupted_loss = 0;
  // Rows analyzed, and those whose real tokens the corruption changed (a
  // next-row corruption leaves a row without a donor as it is); 0 and 0:
  // not recorded (a file written before they were).
  int64_t rows = 0, corrupted_rows = 0;
};

// The rows resample ablation reached: those with a donor (analysis/donors.h).
struct ResampleCoverage {
  int64_t rows = 0, with_donor = 0;
};

std::string head_name(int64_t layer, int64_t head);  // "L0H1"

// One example's attention, for heatmaps.
struct AttentionExample {
  std::vector<int32_t> tokens;             // [T]
  std::vector<std::string> token_labels;   // [T] for display; empty = the token ids
  std::vector<std::vector<std::vector<double>>> attention;  // [layer][head][q * T + k]
  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
  std::string token_label(int64_t position) const;  // token_labels[p], else the id
};

struct RunAnalysis {
  int64_t num_layers = 0, num_heads = 0;  // heads per layer
  bool causal = true;
  // What was analyzed: the task's name or "data:FILE" (empty: not recorded).
  std::string analyzed;
  // The training step of the checkpoint analyzed (absent: not recorded, or
  // not a checkpoint): a run folder's heads.json of its last step says the
  // run is complete (train/trainer.h, analyzed_step).
  std::optional<int64_t> step;
  std::vector<PatternInfo> user_patterns;   // every head's scores.user, in this order
  std::vector<ExpectedRole> expected_roles;  // what the verdict looks for
  // Uniform attention's scores on the set (LabelSet::chance), the user patterns' among them; absent in a
  // heads.json from before they were measured.
  std::optional<HeadScores> chance;
  // The label options the labels and the verdict were made with (relabel; kLabelFlags's are in heads.json);
  // absent in a heads.json from before they were recorded.
  std::optional<LabelOptions> label_options;
  std::optional<double> loss, accuracy;   // of the unablated model on the analysis batch
  std::vector<HeadAnalysis> heads;        // layer-major: index = layer * num_heads + head
  std::vector<std::vector<double>> js;    // JS divergence (bits) between heads, same order
  Verdict verdict;
  AttentionExample example;
  // Weight-based circuits, filled when the model is at hand (analyze_model):
  std::vector<Composition> composition;             // every (earlier, later) pair of heads
  std::optional<double> composition_baseline;       // mean score of random matrices of the same shapes
  bool circuits_layernorm_folded = false, circuits_mlp_ignored = false;  // the approximation used
  std::optional<PruningCurve> pruning;
  std::vector<SetAblation> set_ablations;             // filled by the caller (analyze_model)
  std::vector<std::optional<double>> position_loss;   // [T], absent where no target
  std::optional<double> icl_score;                    // late minus early position loss
  std::optional<PatchingSummary> patching;            // with analyze --patch
  std::optional<ResampleCoverage> resample;           // with analyze --patch

  const HeadAnalysis& at(int64_t layer, int64_t head) const;
  HeadAnalysis& at(int64_t layer, int64_t head);
};

// What analyze_attention knows of the batch beyond the tokens.
struct BatchContext {
  std::span<const int32_t> targets = {};  // [B * T] or empty: the built-in patterns judge the queries with a target
  std::span<const AttendPattern> attend = {};  // user patterns, scored for every head
  std::span<const ExpectedRole> roles = {};    // the task's expected roles
  std::span<const int32_t> lengths = {};  // [B] real lengths of padded rows, or empty: only real positions count
};

// Scores, JS matrix, labels and verdict from the attention of every layer
// ([B, h, T, T] each, same B, h and T) and the tokens [B * T] (may be empty);
// the example for heatmaps is batch row `example`, its real positions only.
RunAnalysis analyze_attention(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, bool causal,
                              const LabelOptions& options = {}, int64_t example = 0, const BatchContext& context = {});

// analyze_attention over a set read in chunks (analyze_model.h): add() each
// chunk's attention of every layer, with its tokens and context, `first` being
// its first row in the set; value() is what analyze_attention of one batch
// holding every chunk gives (the same sums in the same order), the heatmaps'
// example being row `example` of the set. The chunks must agree on the
// layers, heads, positions and user patterns.
class AttentionSums {
 public:
  AttentionSums(bool causal, int64_t example) : causal_(causal), example_(example) {}
  void add(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, int64_t first,
           const BatchContext& context = {});
  // The same, the `layers` layers of `heads` heads asked of `attention` in
  // JsSums::add's order (head_metrics.h): at most two layers' attention are
  // held at once. `visit` (optional) is handed each layer's attention once,
  // in layer order.
  void add(int64_t layers, int64_t heads, const LayerAttention& attention, std::span<const int32_t> tokens,
           int64_t first, const BatchContext& context = {}, const LayerVisit& visit = {});
  RunAnalysis value(const LabelOptions& options = {}) const;

 private:
  bool causal_;
  int64_t example_;
  int64_t rows_ = 0;
  // The record so far: sizes, patterns, roles and, once its chunk came, the example.
  RunAnalysis run_;
  bool has_example_ = false;
  std::vector<HeadScoreSums> scores_;               // per layer
  std::vector<std::vector<AttendScoreSums>> user_;  // per layer, per user pattern
  JsSums js_;
  NestingSums nesting_;
  // One head of uniform attention over the same rows: the chance scores.
  HeadScoreSums chance_;
  std::vector<AttendScoreSums> chance_user_;  // per user pattern
};

// What the labels of `run`'s heads know of its set: its chance scores and its expected roles' patterns.
LabelSet label_set(const RunAnalysis& run);

// The user-set label options (kLabelFlags) that `run` was labelled with and
// `expected` does not have, as "--threshold 0.6 (not 0.5), --margin 0.1 (not
// 0.15)"; empty when they agree or `run` does not record them (a heads.json
// from before): a sweep pools only runs labelled alike.
std::string label_options_departures(const RunAnalysis& run, const LabelOptions& expected = {});

// Recomputes every label and the verdict, e.g. after ablation was filled in
// (and records `options` in run.label_options).
// A first-token head is a sink only if it adds no more than the sink bound to
// the set of its role (set_ablations) either (added_cost, and in a set of
// three added_beside_partners; the set's whole cost where neither was
// measured): two redundant first-token heads are not both called sinks, and
// one that writes nothing beside a used one is.
void relabel(RunAnalysis& run, const LabelOptions& options = {});

// The sets worth ablating together, from scores and labels without ablation:
// for each pattern (built-in or user), its heads when there are at least two;
// and the induction circuit -- the heads of a later layer whose task
// induction score reaches the threshold with the earlier layers' heads whose
// task previous-token score does (on a task without task-position scores:
// the heads labelled induction and previous-token) -- when both are found.
// delta_* are left 0.
std::vector<SetAblation> candidate_sets(const RunAnalysis& run, const LabelOptions& options = {});

// Whether analyze_model also ablates `set` without each member in turn: a
// role's set of three or more heads (for two, the other head's own ablation
// is that; the induction circuit credits no head).
bool ablates_without(const SetAblation& set);

// What ablating `set` but its member `k` (an index into set.heads) costs:
// set.without[k], or for a set of two the other head's own ablation; absent
// when neither was measured.
std::optional<SetAblation::Cost> set_without(const RunAnalysis& run, const SetAblation& set, std::size_t k);

// What head `i` (a member of `set`) adds to its cost: the set's cost less
// set_without's; absent when that was not measured.
std::optional<SetAblation::Cost> added_cost(const RunAnalysis& run, const SetAblation& set, std::size_t i);

// In a set of three, what head `i` adds beside each other member x: the pair
// {i, x} (the set without the third member, measured) against x's own
// ablation. Three heads of which any two do the job each add nothing to the
// three (the one left cannot do it alone either way), but each adds all of it
// beside one partner. Empty for other sets, or unmeasured.
std::vector<SetAblation::Cost> added_beside_partners(const RunAnalysis& run, const SetAblation& set, std::size_t i);

// Mean JS divergence between the heads of one layer; absent for one head.
std::optional<double> layer_mean_js(const RunAnalysis& run, int64_t layer);

}  // namespace headlab::analysis

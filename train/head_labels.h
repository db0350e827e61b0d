// Head labels, attention sinks and a run's verdict (DESIGN section 6), and the
// analysis record behind heads.json, the terminal table and report.html.
//
// The flow: analyze_attention() scores every head from attention tensors,
// labels them and judges the run. The caller (the trainer or `headlab analyze`)
// may then fill in what needs the model -- ablation deltas, gate importance,
// the unablated loss and accuracy, token labels -- and call relabel(), which
// recomputes labels (sinks need ablation) and the verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "train/head_metrics.h"

namespace headlab::train {

enum class Label { previous_token, first_token, self, induction, duplicate_token, diffuse, mixed, sink };

std::string label_name(Label label);  // "previous-token", "first-token", "self", ...
// Inverse of label_name; throws std::invalid_argument listing the valid names.
Label label_from_name(const std::string& name);
// True for the five attention patterns, false for diffuse, mixed and sink.
bool is_pattern(Label label);

// Thresholds of labelling and of the verdict; see docs/head-metrics.md.
struct LabelOptions {
  // A pattern labels a head when its score reaches this...
  double score_threshold = 0.5;
  // ...and beats the runner-up pattern's score by at least this.
  double margin = 0.15;
  // Without a clear pattern: "diffuse" at or above this normalized entropy, else "mixed".
  double diffuse_entropy = 0.8;
  // A first-token head is a "sink" when ablating it raises the loss by at most
  // this many nats (absolute; a negative change counts too). Needs ablation.
  double sink_max_delta_loss = 0.02;
  // Verdict: at least this many distinct pattern labels among the counted heads.
  // Specialization means heads taking different roles, so a one-head model never
  // specializes.
  int64_t min_distinct_labels = 2;
  // Verdict: every two counted heads with different labels differ by at least
  // this mean JS divergence (bits, in [0, 1]).
  double min_js = 0.3;
  // A head with a pattern label is counted only if, when ablation was measured,
  // its ablation costs at least this much accuracy (a fraction: 0.02 = 2 points)
  // or at least min_ablation_loss_rise nats of loss. The loss test counts heads
  // that back each other up: with four heads, ablating one of two
  // previous-token heads barely moves accuracy, but it still costs loss.
  double min_ablation_acc_drop = 0.02;
  double min_ablation_loss_rise = 0.05;
};

struct PatternScore {
  Label pattern;
  double score;
};
// The five pattern scores that exist (induction and duplicate-token may be
// absent), highest first; ties keep the order of the Label enum.
std::vector<PatternScore> ranked_patterns(const HeadScores& scores);

// The label of one head. ablation_delta_loss = loss with the head's gate at 0
// minus the loss without ablation; when absent, no head is called a sink.
Label label_head(const HeadScores& scores, std::optional<double> ablation_delta_loss, const LabelOptions& options);

struct HeadAnalysis {
  int64_t layer = 0, head = 0;
  HeadScores scores;
  Label label = Label::mixed;
  // Filled by the caller when the model is at hand (all absent otherwise):
  std::optional<double> ablation_delta_loss;  // loss(gate = 0) - loss, nats
  std::optional<double> ablation_delta_acc;   // accuracy(gate = 0) - accuracy, fraction
  std::optional<double> importance;           // mean |dL/d gate| over the batch
};

std::string head_name(int64_t layer, int64_t head);  // "L0H1"

struct Verdict {
  bool specialized = false;
  std::vector<std::string> reasons;  // one sentence each, with the numbers
  int64_t counted_heads = 0;         // pattern-labelled heads whose ablation (if measured) costs accuracy
  int64_t distinct_labels = 0;       // among the counted heads
  std::optional<double> min_js;      // over counted heads with different labels
};

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
  std::optional<double> loss, accuracy;   // of the unablated model on the analysis batch
  std::vector<HeadAnalysis> heads;        // layer-major: index = layer * num_heads + head
  std::vector<std::vector<double>> js;    // JS divergence (bits) between heads, same order
  Verdict verdict;
  AttentionExample example;

  const HeadAnalysis& at(int64_t layer, int64_t head) const;
  HeadAnalysis& at(int64_t layer, int64_t head);
};

// Scores, JS matrix, labels and verdict from the attention of every layer
// ([B, h, T, T] each, same B, h and T) and the tokens [B * T] (may be empty);
// the example for heatmaps is batch row `example`.
RunAnalysis analyze_attention(const std::vector<core::Tensor>& layers, std::span<const int32_t> tokens, bool causal,
                              const LabelOptions& options = {}, int64_t example = 0);

// Recomputes every label and the verdict, e.g. after ablation was filled in.
void relabel(RunAnalysis& run, const LabelOptions& options = {});

Verdict judge(const RunAnalysis& run, const LabelOptions& options = {});

// Mean JS divergence between the heads of one layer; absent for one head.
std::optional<double> layer_mean_js(const RunAnalysis& run, int64_t layer);

// heads.json (schema in docs/head-metrics.md). from_json throws
// nlohmann::json exceptions or std::invalid_argument on a malformed document.
void to_json(nlohmann::json& j, const RunAnalysis& run);
void from_json(const nlohmann::json& j, RunAnalysis& run);

// The per-step record for metrics.jsonl, meant to be merged into the line:
// {"heads": {"L0H0": {"label", "score", "previous_token", ...}}, "layer_js": [...],
//  "specialized": bool}; values rounded to 4 decimals, no example attention.
nlohmann::json compact_json(const RunAnalysis& run);

}  // namespace headlab::train

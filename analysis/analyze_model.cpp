#include "analysis/analyze_model.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "analysis/ablation.h"
#include "analysis/circuits.h"
#include "analysis/composition.h"
#include "analysis/direct_logit.h"
#include "analysis/importance.h"
#include "analysis/position_loss.h"
#include "analysis/prefix.h"
#include "analysis/pruning.h"
#include "analysis/resample.h"
#include "analysis/task_positions.h"
#include "core/gemm.h"
#include "core/interrupt.h"

namespace headlab::analysis {
namespace {

// The scoring pass over `examples`: the logits, the residual stream each
// later pass starts from, and each layer's attention as the scores ask for
// it. The probe keeps the attention of the first and the last layer, the
// first two the scores ask for; they ask for the others (and the last again)
// when they pair them, computed again from the residual stream entering the
// layer: two layers' [B, h, T, T] at a time, not L (docs/head-metrics.md,
// "What the analysis holds").
struct ScoringPass {
  layers::Probe probe;
  core::Tensor logits;
  Prefix prefix;

  ScoringPass(const layers::Transformer& model, const Examples& examples) : probe(model.num_layers()) {
    for (int64_t l = 1; l + 1 < model.num_layers(); ++l)
      probe.layers[static_cast<std::size_t>(l)].keep.attention = false;
    logits = Prefix().logits(model, examples, probe, 0);
    prefix = Prefix(probe);
  }

  // A kept layer is handed over the first time it is asked for.
  LayerAttention attention(const layers::Transformer& model, const Examples& examples) {
    return [this, &model, &examples](int64_t l) {
      core::Tensor& kept = probe.layers[static_cast<std::size_t>(l)].attention;
      return kept.defined() ? std::exchange(kept, {}) : prefix.attention(model, examples, l);
    };
  }
};

// The passes of one head's ablation (or patching, resample) from its layer
// on, summed over the heads: a head of layer l runs L - l of the L blocks.
double per_head_passes(int64_t L, int64_t H) { return static_cast<double>(H * (L + 1)) / 2.0; }

// The forward passes of the set (in whole passes, prefix.h) each pass over it runs.
struct PassCounts {
  double first = 0, second = 0;
};

PassCounts pass_counts(int64_t L, int64_t H, const AnalysisOptions& options) {
  const double each = per_head_passes(L, H);
  PassCounts c;
  // The clean pass (direct logit attribution reads its probe) and each
  // head's zero ablation; with interventions also its resample ablation, and
  // patching's corrupted pass and each head patched into it.
  c.first = 1 + each + (options.interventions ? 1 + 2 * each : 0);
  // The pruning curve's points after the first (the clean pass) in each
  // order, each from the layer of the head it removes; mean ablation.
  c.second = (options.pruning ? static_cast<double>(1 + options.pruning_random_orders) * each : 0) +
             (options.interventions ? each : 0);
  return c;
}

// The progress reports: each pass's work, in forward passes of the set.
class Progress {
 public:
  Progress(const AnalysisOptions& options, int64_t rows, const PassCounts& counts)
      : report_(options.progress), rows_(rows), first_(counts.first), second_(counts.second) {}
  int passes() const { return second_ > 0 ? 2 : 1; }
  // The second pass's work, once the set ablations are known.
  void add_second(double passes) { second_ += passes; }
  void chunk_done(int pass, int64_t rows_done) {
    if (!report_) return;
    const double part = static_cast<double>(rows_done) / static_cast<double>(rows_);
    const double done = pass == 1 ? first_ * part : first_ + second_ * part;
    report_({pass, passes(), rows_done, rows_, std::min(1.0, done / (first_ + second_))});
  }

 private:
  const std::function<void(const AnalysisProgress&)>& report_;
  int64_t rows_;
  double first_, second_;
};

}  // namespace

double analysis_passes(int64_t layers, int64_t heads, const AnalysisOptions& options) {
  const PassCounts c = pass_counts(layers, heads, options);
  return c.first + c.second;
}

double set_ablation_passes(const std::vector<SetAblation>& sets, int64_t layers, int64_t heads) {
  // A pass that ablates `members` starts at the first one's layer.
  const auto from_first = [&](const std::vector<std::size_t>& members, std::size_t skip) {
    int64_t first = layers;
    for (std::size_t k = 0; k < members.size(); ++k)
      if (k != skip) first = std::min(first, static_cast<int64_t>(members[k]) / heads);
    if (first == layers) first = 0;  // no member: add_ablated runs from the embedding
    return static_cast<double>(layers - first) / static_cast<double>(layers);
  };
  double passes = 0;
  for (const SetAblation& set : sets) {
    passes += from_first(set.heads, set.heads.size());
    if (ablates_without(set))
      for (std::size_t k = 0; k < set.heads.size(); ++k) passes += from_first(set.heads, k);
  }
  return passes;
}

RunAnalysis analyze_model(const layers::Transformer& model, const Examples& examples,
                          const AnalysisOptions& options) {
  if (!options.corruption.tokens.empty() && options.corruption.tokens.size() != examples.tokens.size())
    throw std::invalid_argument("patch_heads: " + std::to_string(options.corruption.tokens.size()) +
                                " corrupted tokens for a clean batch of " + std::to_string(examples.tokens.size()));
  const auto T = static_cast<std::size_t>(examples.seq_len);
  const ReadChunk read = [&](int64_t first, int64_t count, bool corrupted) {
    ExampleChunk chunk;
    if (first == 0 && count == examples.batch) {
      chunk.examples = examples;
    } else {
      auto patterns = std::make_shared<std::vector<AttendPattern>>();
      for (const AttendPattern& p : examples.attend) patterns->push_back(attend_rows(p, first, count));
      chunk.examples = examples.rows(first, count);
      chunk.examples.attend = *patterns;
      chunk.examples.roles = examples.roles;
      chunk.examples.sources = examples.sources;
      chunk.storage = patterns;
    }
    if (corrupted && !options.corruption.tokens.empty())
      chunk.corrupted = options.corruption.tokens.subspan(static_cast<std::size_t>(first) * T,
                                                          static_cast<std::size_t>(count) * T);
    return chunk;
  };
  return analyze_chunks(model, examples.batch, examples.lengths, read, options);
}

RunAnalysis analyze_model_attention(const layers::Transformer& model, const Examples& examples,
                                    const LabelOptions& options, int64_t example, const BatchContext& context) {
  const core::F32Gemms f32_gemms;  // as analyze_chunks
  ScoringPass scoring(model, examples);
  AttentionSums sums(model.spec().causal, example);
  sums.add(model.num_layers(), model.spec().heads, scoring.attention(model, examples), examples.tokens, 0, context);
  return sums.value(options);
}

RunAnalysis analyze_chunks(const layers::Transformer& model, int64_t rows, std::span<const int32_t> lengths,
                           const ReadChunk& read, const AnalysisOptions& options) {
  // Head metrics describe the model, not the arithmetic it trained with: the
  // same weights give the same report under --precision f32 or bf16.
  const core::F32Gemms f32_gemms;
  const int64_t L = model.num_layers(), H = model.spec().heads;
  const bool causal = model.spec().causal;
  const auto heads = static_cast<std::size_t>(L * H);
  if (rows < 1) throw std::invalid_argument("analyze_model: no examples to analyze");
  if (options.example < 0 || options.example >= rows)
    throw std::invalid_argument("analyze_attention: example " + std::to_string(options.example) +
                                " is outside the batch of " + std::to_string(rows));
  const int64_t chunk = options.chunk_rows > 0 ? std::min(options.chunk_rows, rows) : rows;
  Progress progress(options, rows, pass_counts(L, H, options));

  // First pass: what each chunk adds to on its own.
  EvalSums base;
  AttentionSums attention(causal, options.example);
  PositionLossSums positions;
  std::vector<EvalSums> zero(heads);
  ImportanceSums importance(ImportanceObjective::loss), margin(ImportanceObjective::margin);
  DirectLogitSums dla;
  std::vector<TaskPositionSums> task(static_cast<std::size_t>(L));
  bool sources = false;
  MeanOutputSums means;
  std::optional<ResampleSums> resample;
  if (options.interventions) resample.emplace(model, rows, lengths);
  // A donor beyond the chunk, read and run on its own.
  const ResampleSums::RowOutputs beyond = [&](int64_t row) {
    return record_head_outputs(model, read(row, 1, false).examples);
  };
  PatchingSums patching;
  bool patched = false;
  // The clean pass of a set read in one chunk, its logits and residual
  // stream, kept for the second pass (several chunks: run again per chunk).
  std::pair<core::Tensor, Prefix> one_chunk;
  for (int64_t first = 0; first < rows; first += chunk) {
    core::check_interrupt();
    const int64_t n = std::min(chunk, rows - first);
    const ExampleChunk c = read(first, n, options.interventions);
    const Examples& ex = c.examples;
    if (ex.batch != n)
      throw std::invalid_argument("analyze_chunks: rows " + std::to_string(first) + " .. " +
                                  std::to_string(first + n - 1) + " read as " + std::to_string(ex.batch) + " rows");
    ScoringPass scoring(model, ex);
    const core::Tensor& logits = scoring.logits;
    const layers::Probe& probe = scoring.probe;
    // What every pass that ablates or patches from a later layer on starts from.
    const Prefix& prefix = scoring.prefix;
    base.add(logits, ex.targets);
    positions.add(logits, ex.targets);
    std::vector<core::Tensor> clean;
    for (const layers::LayerProbe& layer : probe.layers) clean.push_back(layer.head_outputs);
    // Only a task with sources: elsewhere an earlier copy is chance, and the
    // "sources" it names mean nothing.
    if (first == 0) sources = ex.sources;
    const LayerVisit task_positions = [&](int64_t l, const core::Tensor& a) {
      if (sources) task[static_cast<std::size_t>(l)].add(a, ex.tokens, ex.targets, causal);
    };
    // Nothing reads the attention past here: the chunk's many passes run without it.
    attention.add(L, H, scoring.attention(model, ex), ex.tokens, first,
                  {ex.targets, ex.attend, ex.roles, ex.lengths}, task_positions);
    for (std::size_t i = 0; i < heads; ++i) add_ablated(zero[i], model, ex, {i}, {}, prefix);
    // The first importance_examples rows of the set.
    const int64_t gradients = std::clamp<int64_t>(options.importance_examples - first, 0, n);
    if (first == 0 || gradients > 0) {
      importance.add(model, ex.rows(0, gradients));
      margin.add(model, ex.rows(0, gradients));
    }
    dla.add(model, ex, probe);
    if (options.interventions) {
      means.add(clean, ex.lengths);
      resample->add(ex, first, logits, clean, beyond, prefix);
      if (!c.corrupted.empty()) {
        patching.add(model, ex, {c.corrupted, options.corruption.gates}, logits, clean);
        patched = true;
      }
    }
    // One chunk: the second pass starts from this pass's residuals.
    if (chunk == rows) one_chunk = {logits, prefix};
    progress.chunk_done(1, first + n);
  }

  RunAnalysis run = attention.value(options.labels);
  const EvalResult unablated = base.result();
  run.loss = unablated.loss;
  run.accuracy = unablated.accuracy;
  run.position_loss = positions.value();
  run.icl_score = icl_score(run.position_loss);
  const std::vector<double> gradient = importance.value();
  const std::vector<double> gradient_margin = margin.value();
  const std::vector<double> normalized = normalize_per_layer(gradient_margin, H);
  const CircuitWeights weights = circuit_weights(model);
  const std::vector<double> direct = dla.value();
  const auto deltas = [&](const EvalSums& ablated) {
    const EvalResult r = ablated.result();
    return Ablation{r.loss - unablated.loss, r.accuracy - unablated.accuracy};
  };
  for (int64_t l = 0; l < L; ++l) {
    const std::vector<TaskPositionScores> scores =
        sources ? task[static_cast<std::size_t>(l)].value() : std::vector<TaskPositionScores>(static_cast<std::size_t>(H));
    for (int64_t h = 0; h < H; ++h) {
      const auto i = static_cast<std::size_t>(l * H + h);
      const Ablation a = deltas(zero[i]);
      HeadAnalysis& head = run.at(l, h);
      head.ablation_delta_loss = a.delta_loss;
      head.ablation_delta_acc = a.delta_accuracy;
      head.importance = gradient[i];
      head.importance_margin = gradient_margin[i];
      head.importance_normalized = normalized[i];
      head.copying = ov_copying_score(weights, l, h);
      head.task = scores[static_cast<std::size_t>(h)];
      head.direct_logit = direct[i];
    }
  }
  run.composition = composition_scores(weights);
  if (L > 1) run.composition_baseline = composition_baseline(weights.d_model, weights.d_k);
  run.circuits_layernorm_folded = weights.layernorm_folded;
  run.circuits_mlp_ignored = weights.mlp_ignored;

  // Second pass: what needs the first's results -- the pruning order (the
  // importance), the sets (the labels), mean ablation (the set's mean).
  run.set_ablations = candidate_sets(run, options.labels);
  // A role's set of three or more is also ablated without each member in
  // turn (what each adds to it): at most one more ablation per head, as a
  // head is in one role's set.
  std::vector<std::vector<EvalSums>> without(run.set_ablations.size());
  for (std::size_t s = 0; s < without.size(); ++s)
    if (ablates_without(run.set_ablations[s])) without[s].resize(run.set_ablations[s].heads.size());
  progress.add_second(set_ablation_passes(run.set_ablations, L, H));
  std::optional<PruningSums> pruning;
  if (options.pruning) pruning.emplace(L * H, normalized, options.pruning_random_orders);
  std::vector<EvalSums> sets(run.set_ablations.size()), mean(options.interventions ? heads : 0);
  if (chunk < rows && progress.passes() == 2) progress.add_second(1);
  if (progress.passes() == 2)
    for (int64_t first = 0; first < rows; first += chunk) {
      core::check_interrupt();
      const int64_t n = std::min(chunk, rows - first);
      const ExampleChunk c = read(first, n, false);
      // The chunk's clean pass, again unless the set is this one chunk:
      // the first point of the pruning curve, and the residuals every
      // ablation here starts from at its first layer.
      std::pair<core::Tensor, Prefix> clean = one_chunk;
      if (chunk < rows) {
        layers::Probe probe(L, layers::ProbeOutputs::only_residual());
        clean.first = Prefix().logits(model, c.examples, probe, 0);
        clean.second = Prefix(probe);
      }
      const auto& [logits, prefix] = clean;
      if (pruning) pruning->add(model, c.examples, logits, prefix);
      for (std::size_t s = 0; s < sets.size(); ++s) {
        const std::vector<std::size_t>& members = run.set_ablations[s].heads;
        add_ablated(sets[s], model, c.examples, members, {}, prefix);
        for (std::size_t k = 0; k < without[s].size(); ++k) {
          std::vector<std::size_t> rest = members;
          rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(k));
          add_ablated(without[s][k], model, c.examples, rest, {}, prefix);
        }
      }
      if (options.interventions) {
        const std::vector<core::Tensor> replacement = means.replacement(n);
        for (std::size_t i = 0; i < heads; ++i) add_ablated(mean[i], model, c.examples, {i}, replacement, prefix);
      }
      progress.chunk_done(2, first + n);
    }
  one_chunk = {};  // its residuals freed before the report is made
  if (pruning) run.pruning = pruning->value();
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const Ablation a = deltas(sets[s]);
    run.set_ablations[s].delta_loss = a.delta_loss;
    run.set_ablations[s].delta_accuracy = a.delta_accuracy;
    for (const EvalSums& rest : without[s]) {
      const Ablation r = deltas(rest);
      run.set_ablations[s].without.push_back({r.delta_loss, r.delta_accuracy});
    }
  }
  if (options.interventions) {
    const std::vector<std::optional<double>> resampled = resample->delta_loss();
    for (std::size_t i = 0; i < heads; ++i) {
      run.heads[i].mean_ablation_delta_loss = deltas(mean[i]).delta_loss;
      run.heads[i].resample_ablation_delta_loss = resampled[i];
    }
    run.resample = ResampleCoverage{resample->rows(), resample->covered()};
    if (patched) {
      const Patching p = patching.value();
      run.patching = PatchingSummary{options.corruption_text, p.clean_loss, p.corrupted_loss, p.rows, p.corrupted_rows};
      for (std::size_t i = 0; i < heads; ++i) run.heads[i].patch_restored = p.restored[i];
    }
  }
  relabel(run, options.labels);
  return run;
}

}  // namespace headlab::analysis

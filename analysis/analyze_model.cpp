#include "analysis/analyze_model.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "analysis/ablation.h"
#include "analysis/circuits.h"
#include "analysis/composition.h"
#include "analysis/direct_logit.h"
#include "analysis/importance.h"
#include "analysis/position_loss.h"
#include "analysis/pruning.h"
#include "analysis/resample.h"
#include "analysis/task_positions.h"
#include "core/gemm.h"
#include "core/interrupt.h"

namespace headlab::analysis {
namespace {

// The progress reports: each pass's work per row, in forward passes over it.
class Progress {
 public:
  Progress(const AnalysisOptions& options, int64_t rows, int64_t heads)
      : report_(options.progress), rows_(rows) {
    // The forward, direct logit attribution and each head's zero ablation;
    // with interventions also its resample ablation and patching (with the
    // clean and the corrupted runs).
    first_ = 2 + heads + (options.interventions ? 3 + 2 * heads : 0);
    second_ = (options.pruning ? (heads + 1) * (1 + options.pruning_random_orders) : 0) +
              (options.interventions ? heads : 0);
  }
  int passes() const { return second_ > 0 ? 2 : 1; }
  // The second pass's work, once the set ablations are known.
  void add_second(int64_t evaluations) { second_ += evaluations; }
  void chunk_done(int pass, int64_t rows_done) {
    if (!report_) return;
    const double total = static_cast<double>(first_ + second_) * static_cast<double>(rows_);
    const double done = static_cast<double>(pass == 1 ? first_ * rows_done : first_ * rows_ + second_ * rows_done);
    report_({pass, passes(), rows_done, rows_, std::min(1.0, done / total)});
  }

 private:
  const std::function<void(const AnalysisProgress&)>& report_;
  int64_t rows_, first_ = 0, second_ = 0;
};

}  // namespace

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
  Progress progress(options, rows, static_cast<int64_t>(heads));

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
  for (int64_t first = 0; first < rows; first += chunk) {
    core::check_interrupt();
    const int64_t n = std::min(chunk, rows - first);
    const ExampleChunk c = read(first, n, options.interventions);
    const Examples& ex = c.examples;
    if (ex.batch != n)
      throw std::invalid_argument("analyze_chunks: rows " + std::to_string(first) + " .. " +
                                  std::to_string(first + n - 1) + " read as " + std::to_string(ex.batch) + " rows");
    layers::Probe probe(L);
    core::Tensor logits;
    {
      autograd::NoGradGuard no_grad;
      const core::Tensor mask = ex.padding_mask();
      logits = model.forward(ex.tokens, ex.batch, ex.seq_len, &mask, &probe).value();
    }
    base.add(logits, ex.targets);
    positions.add(logits, ex.targets);
    std::vector<core::Tensor> attn, clean;
    for (const layers::LayerProbe& layer : probe.layers) {
      attn.push_back(layer.attention);
      clean.push_back(layer.head_outputs);
    }
    attention.add(attn, ex.tokens, first, {ex.targets, ex.attend, ex.roles, ex.lengths});
    // Only a task with sources: elsewhere an earlier copy is chance, and the
    // "sources" it names mean nothing.
    if (first == 0) sources = ex.sources;
    for (int64_t l = 0; l < L && sources; ++l)
      task[static_cast<std::size_t>(l)].add(attn[static_cast<std::size_t>(l)], ex.tokens, ex.targets, causal);
    for (std::size_t i = 0; i < heads; ++i) add_ablated(zero[i], model, ex, {i});
    // The first importance_examples rows of the set.
    const int64_t gradients = std::clamp<int64_t>(options.importance_examples - first, 0, n);
    if (first == 0 || gradients > 0) {
      importance.add(model, ex.rows(0, gradients));
      margin.add(model, ex.rows(0, gradients));
    }
    dla.add(model, ex);
    if (options.interventions) {
      means.add(clean, ex.lengths);
      resample->add(ex, first, logits, clean, beyond);
      if (!c.corrupted.empty()) {
        patching.add(model, ex, {c.corrupted, options.corruption.gates});
        patched = true;
      }
    }
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
  for (std::size_t s = 0; s < without.size(); ++s) {
    if (ablates_without(run.set_ablations[s])) without[s].resize(run.set_ablations[s].heads.size());
    progress.add_second(1 + static_cast<int64_t>(without[s].size()));
  }
  std::optional<PruningSums> pruning;
  if (options.pruning) pruning.emplace(L * H, normalized, options.pruning_random_orders);
  std::vector<EvalSums> sets(run.set_ablations.size()), mean(options.interventions ? heads : 0);
  if (progress.passes() == 2)
    for (int64_t first = 0; first < rows; first += chunk) {
      core::check_interrupt();
      const int64_t n = std::min(chunk, rows - first);
      const ExampleChunk c = read(first, n, false);
      if (pruning) pruning->add(model, c.examples);
      for (std::size_t s = 0; s < sets.size(); ++s) {
        const std::vector<std::size_t>& members = run.set_ablations[s].heads;
        add_ablated(sets[s], model, c.examples, members);
        for (std::size_t k = 0; k < without[s].size(); ++k) {
          std::vector<std::size_t> rest = members;
          rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(k));
          add_ablated(without[s][k], model, c.examples, rest);
        }
      }
      if (options.interventions) {
        const std::vector<core::Tensor> replacement = means.replacement(n);
        for (std::size_t i = 0; i < heads; ++i) add_ablated(mean[i], model, c.examples, {i}, replacement);
      }
      progress.chunk_done(2, first + n);
    }
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

// Passes that start at a later layer from an earlier pass's residual stream
// (analysis/prefix.h): every number of the analysis is the one that passes
// from the embedding give, bit for bit, on a model of several layers.
#include "analysis/prefix.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analysis/ablation.h"
#include "analysis/analyze_model.h"
#include "analysis/direct_logit.h"
#include "analysis/pruning.h"
#include "core/gemm.h"

namespace headlab::analysis {
namespace {

// An f32 model of 3 layers of 3 heads with LayerNorm, an MLP and random
// weights; rows of mixed lengths and a corruption (every token one up).
struct ThreeLayers {
  static constexpr int64_t B = 9, T = 7, V = 6, L = 3, H = 3;
  core::Generator gen{5};
  layers::Transformer model;
  std::vector<int32_t> tokens, targets, lengths, corrupted;

  ThreeLayers()
      : model(layers::ModelSpec{.vocab = V, .classes = V, .max_seq_len = T, .layers = L, .heads = H, .d_model = 12,
                                .attn_only = false, .layernorm = true, .causal = true},
              gen, core::DType::f32) {
    core::Generator draw(11);
    for (auto& [name, p] : model.named_parameters()) p.mutable_value().copy_(draw.normal(p.shape(), 0.0, 0.7));
    for (int64_t b = 0; b < B; ++b) {
      const auto n = static_cast<int32_t>(b % 4 == 3 ? 4 : T);
      lengths.push_back(n);
      for (int64_t t = 0; t < T; ++t) {
        tokens.push_back(t < n ? static_cast<int32_t>(draw.integer(0, V)) : 0);
        targets.push_back(t < n && t > 0 ? static_cast<int32_t>(draw.integer(0, V)) : -1);
      }
    }
    for (const int32_t token : tokens) corrupted.push_back(static_cast<int32_t>((token + 1) % V));
  }

  Examples examples() const { return {B, T, tokens, targets, lengths}; }

  // The loss and accuracy of a pass from the embedding with the heads
  // `gated_off` (layer-major) zeroed, on `tokens_in` (default: the clean ones),
  // and `patched` (a head) given the clean pass's output.
  EvalResult whole_pass(const std::vector<int64_t>& gated_off, std::span<const int32_t> tokens_in = {},
                        std::optional<int64_t> patched = std::nullopt) const {
    layers::Probe clean(L);
    if (patched) (void)evaluate(model, examples(), &clean);
    layers::Probe probe(L);
    for (layers::LayerProbe& layer : probe.layers) layer.gates = autograd::Variable(core::Tensor::ones({H}));
    for (int64_t i : gated_off) probe.layers[static_cast<std::size_t>(i / H)].gates.mutable_value().set({i % H}, 0.0);
    if (patched) {
      layers::LayerProbe& layer = probe.layers[static_cast<std::size_t>(*patched / H)];
      layer.replace_heads.assign(H, false);
      layer.replace_heads[static_cast<std::size_t>(*patched % H)] = true;
      layer.replacement = clean.layers[static_cast<std::size_t>(*patched / H)].head_outputs;
    }
    Examples ex = examples();
    if (!tokens_in.empty()) ex.tokens = tokens_in;
    return evaluate(model, ex, &probe);
  }
};

TEST(Prefix, EveryNumberOfTheAnalysisIsThatOfPassesFromTheEmbedding) {
  const core::F32Gemms f32_gemms;  // as analyze_model's passes are, under any HEADLAB_PRECISION
  const ThreeLayers m;
  const Examples ex = m.examples();
  AnalysisOptions options;
  options.pruning_random_orders = 2;
  options.interventions = true;
  options.corruption.tokens = m.corrupted;
  const RunAnalysis run = analyze_model(m.model, ex, options);
  const EvalResult base = evaluate(m.model, ex);
  ASSERT_EQ(run.loss, base.loss);

  // ablate_heads runs every ablated pass from the embedding.
  const std::vector<Ablation> zero = ablate_heads(m.model, ex, base, AblationKind::zero);
  const std::vector<Ablation> mean = ablate_heads(m.model, ex, base, AblationKind::mean);
  const std::vector<Ablation> resample = ablate_heads(m.model, ex, base, AblationKind::resample);
  const std::vector<double> dla = direct_logit_attribution(m.model, ex);
  const EvalResult corrupted = m.whole_pass({}, m.corrupted);
  int64_t changed = 0;
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    SCOPED_TRACE("head " + std::to_string(i));
    const HeadAnalysis& head = run.heads[i];
    EXPECT_EQ(head.ablation_delta_loss, zero[i].delta_loss);
    EXPECT_EQ(head.ablation_delta_acc, zero[i].delta_accuracy);
    EXPECT_EQ(head.mean_ablation_delta_loss, mean[i].delta_loss);
    EXPECT_EQ(head.resample_ablation_delta_loss, resample[i].delta_loss);
    EXPECT_EQ(head.direct_logit, dla[i]);
    const EvalResult patched = m.whole_pass({}, m.corrupted, static_cast<int64_t>(i));
    EXPECT_EQ(head.patch_restored, (corrupted.loss - patched.loss) / (corrupted.loss - base.loss));
    changed += *head.ablation_delta_loss != 0;
  }
  EXPECT_EQ(changed, ThreeLayers::L * ThreeLayers::H) << "every head's ablation moves the loss: a pass from the "
                                                         "wrong residual would show";

  // The pruning curve, each point from the embedding with its heads gated off.
  ASSERT_EQ(run.pruning->order.size(), run.heads.size());
  std::vector<int64_t> removed;
  for (std::size_t k = 0; k <= run.heads.size(); ++k) {
    SCOPED_TRACE("heads removed: " + std::to_string(k));
    const EvalResult point = m.whole_pass(removed);
    EXPECT_EQ(run.pruning->loss[k], point.loss);
    EXPECT_EQ(run.pruning->accuracy[k], point.accuracy);
    if (k < run.heads.size()) removed.push_back(run.pruning->order[k]);
  }
}

TEST(Prefix, ASetAblatedFromItsFirstLayerIsTheWholePass) {
  const ThreeLayers m;
  const Examples ex = m.examples();
  layers::Probe probe(ThreeLayers::L);
  const core::Tensor logits = Prefix().logits(m.model, ex, probe, 0);
  const Prefix clean(probe);
  EvalSums whole;
  whole.add(logits, ex.targets);
  EXPECT_EQ(whole.result().loss, evaluate(m.model, ex).loss) << "the clean pass";
  MeanOutputSums means;
  std::vector<core::Tensor> outputs;
  for (const layers::LayerProbe& layer : probe.layers) outputs.push_back(layer.head_outputs);
  means.add(outputs, ex.lengths);
  const std::vector<core::Tensor> replacement = means.replacement(ex.batch);
  for (const std::vector<std::size_t>& set : std::vector<std::vector<std::size_t>>{
           {1, 6}, {5, 7}, {8}, {2, 4, 8}, {}}) {
    SCOPED_TRACE("a set of " + std::to_string(set.size()) + " heads");
    for (const std::vector<core::Tensor>& with : {std::vector<core::Tensor>{}, replacement}) {
      EvalSums from_prefix, from_embedding;
      add_ablated(from_prefix, m.model, ex, set, with, clean);
      add_ablated(from_embedding, m.model, ex, set, with);
      EXPECT_EQ(from_prefix.result().loss, from_embedding.result().loss);
      EXPECT_EQ(from_prefix.result().accuracy, from_embedding.result().accuracy);
    }
  }
  // A prefix of other examples is refused, not read.
  EvalSums sums;
  EXPECT_THROW(add_ablated(sums, m.model, ex.rows(0, 4), {4}, {}, clean), std::invalid_argument);
}

TEST(Prefix, ALayersAttentionComputedAgainIsThePassesOwnAndTheScoresAreThoseOfEveryLayerHeldAtOnce) {
  const core::F32Gemms f32_gemms;  // as analyze_model's passes are, under any HEADLAB_PRECISION
  const ThreeLayers m;
  const Examples ex = m.examples();
  layers::Probe probe(ThreeLayers::L);
  (void)Prefix().logits(m.model, ex, probe, 0);
  const Prefix clean(probe);
  std::vector<core::Tensor> attention;
  for (std::size_t l = 0; l < probe.layers.size(); ++l) attention.push_back(probe.layers[l].attention);
  for (int64_t l = 1; l < ThreeLayers::L; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const core::Tensor again = clean.attention(m.model, ex, l);
    ASSERT_EQ(again.shape(), attention[static_cast<std::size_t>(l)].shape());
    EXPECT_EQ(again.to_vector(), attention[static_cast<std::size_t>(l)].to_vector());
  }
  // Layer 0 reads the embedding, which no prefix keeps; other examples are refused.
  EXPECT_THROW((void)clean.attention(m.model, ex, 0), std::invalid_argument);
  EXPECT_THROW((void)clean.attention(m.model, ex.rows(0, 4), 1), std::invalid_argument);

  // analyze_model holds two layers at a time and asks for the others again:
  // the scores, the JS matrix and the heatmaps are those of every layer's
  // attention held at once, bit for bit (rows of mixed lengths).
  const RunAnalysis run = analyze_model(m.model, ex);
  const RunAnalysis held = analyze_attention(attention, ex.tokens, true, {}, 0, {ex.targets, {}, {}, ex.lengths});
  ASSERT_EQ(run.heads.size(), held.heads.size());
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    SCOPED_TRACE("head " + std::to_string(i));
    const HeadScores &a = run.heads[i].scores, &b = held.heads[i].scores;
    EXPECT_EQ(a.patterns, b.patterns);
    EXPECT_EQ(a.patterns_all, b.patterns_all);
    EXPECT_EQ(a.entropy, b.entropy);
    EXPECT_EQ(a.distance, b.distance);
    EXPECT_EQ(a.detector.previous_token, b.detector.previous_token);
    EXPECT_EQ(a.detector.induction, b.detector.induction);
  }
  EXPECT_EQ(run.js, held.js);
  EXPECT_GT(run.js[0][ThreeLayers::H * 2 + 1], 0.0) << "a pair of heads of the first and the last layer";
  EXPECT_EQ(run.example.attention, held.example.attention);
}

TEST(Prefix, TheWorkCountedIsEachHeadsPassFromItsLayer) {
  AnalysisOptions options;
  options.pruning_random_orders = 5;
  // 1 + 8 heads * (4 + 3 + 2 + 1) / 4 blocks, then 6 orders of the same.
  EXPECT_DOUBLE_EQ(analysis_passes(4, 8, options), 1 + 20 + 6 * 20);
  options.pruning = false;
  EXPECT_DOUBLE_EQ(analysis_passes(1, 2, options), 3);
  options.interventions = true;
  // Resample, the corrupted pass and patching; mean ablation.
  EXPECT_DOUBLE_EQ(analysis_passes(1, 2, options), 3 + 5 + 2);
  SetAblation first_and_last{"r", {0, 7}, 0, 0, {}}, three{"s", {4, 6, 7}, 0, 0, {}};
  // {L0H0, L3H1}: 4 blocks of 4; {L2H0, L3H0, L3H1}: 2, and without each
  // member in turn 1, 2 and 2.
  EXPECT_DOUBLE_EQ(set_ablation_passes({first_and_last, three}, 4, 2), 1 + 0.5 + 0.25 + 0.5 + 0.5);
}

}  // namespace
}  // namespace headlab::analysis

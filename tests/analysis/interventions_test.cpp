// Interventions through the probe: ablation kinds and sets, activation
// patching, direct logit attribution (docs/head-metrics.md, "Interventions").
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/ablation.h"
#include "analysis/analyze_model.h"
#include "analysis/direct_logit.h"
#include "analysis/patching.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

// A model with parameters drawn from N(0, 0.5), so every head matters, and a
// batch of random tokens and targets.
struct RandomModel {
  static constexpr int64_t B = 6, T = 5;
  core::Generator gen{11};
  layers::Transformer model;
  std::vector<int32_t> tokens, targets;

  explicit RandomModel(int64_t layers, bool layernorm = false, bool attn_only = true)
      : model(layers::ModelSpec{.vocab = 6, .classes = 6, .max_seq_len = T, .layers = layers, .heads = 2,
                                .d_model = 8, .attn_only = attn_only, .layernorm = layernorm, .causal = true},
              gen, core::DType::f64) {
    core::Generator draw(5);
    for (auto& [name, p] : model.named_parameters()) p.mutable_value().copy_(draw.normal(p.shape(), 0.0, 0.5, core::DType::f64));
    for (int64_t i = 0; i < B * T; ++i) {
      tokens.push_back(static_cast<int32_t>(draw.integer(0, 6)));
      targets.push_back(i % T == 0 ? -1 : static_cast<int32_t>(draw.integer(0, 6)));
    }
  }
  Examples examples() const { return {B, T, tokens, targets}; }
  // Mean logit of the correct class over the positions with a target, with `gates` per layer.
  double mean_correct_logit(const std::vector<std::vector<double>>& gates = {}) const {
    layers::Probe probe(model.num_layers());
    for (std::size_t l = 0; l < gates.size(); ++l)
      probe.layers[l].gates = autograd::Variable(core::Tensor::from_vector(gates[l], {2}, core::DType::f64));
    autograd::NoGradGuard no_grad;
    const core::Tensor logits = model.forward(tokens, B, T, nullptr, &probe).value().contiguous();
    double sum = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < B * T; ++i)
      if (targets[static_cast<std::size_t>(i)] >= 0) {
        sum += logits.data<double>()[i * 6 + targets[static_cast<std::size_t>(i)]];
        ++n;
      }
    return sum / static_cast<double>(n);
  }
};

TEST(Patching, PatchingAHeadIntoARunThatLacksOnlyThatHeadRestoresExactlyAll) {
  RandomModel m(2);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      // The corrupted run is the clean one with head (l, h) ablated.
      Corruption c{m.tokens, {core::Tensor(), core::Tensor()}};
      c.gates[static_cast<std::size_t>(l)] = core::Tensor::ones({2}, core::DType::f64);
      c.gates[static_cast<std::size_t>(l)].set({h}, 0.0);
      const Patching p = patch_heads(m.model, m.examples(), c);
      const auto i = static_cast<std::size_t>(l * 2 + h);
      ASSERT_TRUE(p.restored[i].has_value());
      EXPECT_EQ(*p.restored[i], 1.0) << "head " << i;
      EXPECT_EQ(p.patched_loss[i], p.clean_loss) << "head " << i;
      // The other head of the same layer is the same in both runs: patching it restores nothing.
      EXPECT_EQ(*p.restored[static_cast<std::size_t>(l * 2 + (1 - h))], 0.0);
    }
}

TEST(Patching, AnIdenticalRunHasNoGapAndEveryPatchGivesTheCleanLoss) {
  RandomModel m(2);
  const Patching p = patch_heads(m.model, m.examples(), {m.tokens, {}});
  EXPECT_EQ(p.corrupted_loss, p.clean_loss);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p.patched_loss[i], p.clean_loss);
    EXPECT_FALSE(p.restored[i].has_value()) << "no gap to restore";
  }
}

TEST(Patching, CorruptedTokensOpenAGapAndTheSharesAreFinite) {
  RandomModel m(2);
  std::vector<int32_t> other = m.tokens;
  for (auto& t : other) t = (t + 1) % 6;
  const Patching p = patch_heads(m.model, m.examples(), {other, {}});
  EXPECT_GT(std::abs(p.corrupted_loss - p.clean_loss), 1e-6);
  for (const auto& r : p.restored) ASSERT_TRUE(r && std::isfinite(*r));
  EXPECT_THROW(patch_heads(m.model, m.examples(), {std::vector<int32_t>(3, 0), {}}), std::invalid_argument);
}

TEST(Ablation, ASetEqualsTheModelWithoutThoseHeadsAndOneHeadSetsEqualTheSingleAblations) {
  RandomModel m(1);
  const EvalResult base = evaluate(m.model, m.examples());
  const Ablation both = ablate_set(m.model, m.examples(), base, {0, 1});
  core::Tensor w = m.model.attention(0).o().weight().mutable_value();
  const core::Tensor saved = w.clone();
  w.fill_(0);
  const EvalResult without = evaluate(m.model, m.examples());
  w.copy_(saved);
  EXPECT_NEAR(both.delta_loss, without.loss - base.loss, 1e-12);
  const std::vector<Ablation> each = ablate_heads(m.model, m.examples(), base);
  EXPECT_EQ(ablate_set(m.model, m.examples(), base, {1}).delta_loss, each[1].delta_loss);
  EXPECT_THROW(ablate_set(m.model, m.examples(), base, {2}), std::invalid_argument);
}

TEST(Ablation, MeanAndResampleKeepWhatDoesNotDependOnTheInput) {
  // Identical sequences: every head's output is the same in every example, so
  // replacing it by its mean or by another example's changes nothing, while
  // zeroing it does.
  RandomModel m(2);
  for (int64_t b = 1; b < RandomModel::B; ++b)
    for (int64_t t = 0; t < RandomModel::T; ++t) {
      m.tokens[static_cast<std::size_t>(b * RandomModel::T + t)] = m.tokens[static_cast<std::size_t>(t)];
      m.targets[static_cast<std::size_t>(b * RandomModel::T + t)] = m.targets[static_cast<std::size_t>(t)];
    }
  const EvalResult base = evaluate(m.model, m.examples());
  const auto zero = ablate_heads(m.model, m.examples(), base, AblationKind::zero);
  const auto mean = ablate_heads(m.model, m.examples(), base, AblationKind::mean);
  const auto resample = ablate_heads(m.model, m.examples(), base, AblationKind::resample);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(mean[i].delta_loss, 0.0, 1e-12) << i;
    EXPECT_EQ(resample[i].delta_loss, 0.0) << i;
    EXPECT_GT(std::abs(zero[i].delta_loss), 1e-6) << i;
  }
}

TEST(Ablation, ResampleGivesEachExampleTheNextExamplesHeadOutput) {
  // One layer: resampling both heads makes example b's attention output that
  // of example b + 1, so the residual is emb(x_b) + W_O o(x_{b+1}) + b_O.
  RandomModel m(1);
  const EvalResult base = evaluate(m.model, m.examples());
  const std::vector<core::Tensor> clean = record_head_outputs(m.model, m.examples());
  layers::Probe probe(1);
  core::Tensor shifted = core::Tensor::zeros(clean[0].shape(), core::DType::f64);
  for (int64_t b = 0; b < RandomModel::B; ++b) shifted.select(0, b).copy_(clean[0].select(0, (b + 1) % RandomModel::B));
  probe.layers[0].replace_heads = {true, true};
  probe.layers[0].replacement = shifted;
  const EvalResult by_hand = evaluate(m.model, m.examples(), &probe);
  EXPECT_EQ(ablate_set(m.model, m.examples(), base, {0, 1}, AblationKind::resample).delta_loss, by_hand.loss - base.loss);
}

TEST(Ablation, FullLengthRowsKeepTheirResampleAndPatchingNumbers) {
  // Every row full: row b's donor is row (b + 1) mod B, in one batch and in
  // chunks, as before lengths counted. The numbers of the next-row rule,
  // computed before the length-aware one replaced it (this machine gave them
  // to the last bit; another CPU's GEMM may round differently).
  RandomModel m(2, /*layernorm=*/true, /*attn_only=*/false);
  std::vector<int32_t> other = m.tokens;
  for (auto& t : other) t = (t + 1) % 6;
  const double resample[] = {0.023506724976437354, -0.0083893695253403067, 0.0027045444283717579,
                             0.012847750419623161};
  const double restored[] = {-2.6388753800436611, 1.3754198760542864, 0.44874109531240097, 0.63916819149338511};
  for (const int64_t chunk : {0, 4}) {
    AnalysisOptions o;
    o.interventions = true;
    o.corruption = {other, {}};
    o.chunk_rows = chunk;
    const RunAnalysis run = analyze_model(m.model, m.examples(), o);
    ASSERT_TRUE(run.resample.has_value());
    EXPECT_EQ(run.resample->with_donor, RandomModel::B);
    EXPECT_EQ(run.patching->corrupted_rows, RandomModel::B);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(*run.heads[i].resample_ablation_delta_loss, resample[i], 1e-12) << "chunks of " << chunk << ", head " << i;
      EXPECT_NEAR(*run.heads[i].patch_restored, restored[i], 1e-12) << "chunks of " << chunk << ", head " << i;
    }
  }
}

TEST(DirectLogit, OneLayerWithoutLayerNormSumsToWhatZeroingTheHeadsRemoves) {
  RandomModel m(1);
  const std::vector<double> dla = direct_logit_attribution(m.model, m.examples());
  const double full = m.mean_correct_logit();
  EXPECT_NEAR(dla[0] + dla[1], full - m.mean_correct_logit({{0, 0}}), 1e-10);
  EXPECT_NEAR(dla[0], full - m.mean_correct_logit({{0, 1}}), 1e-10);
  EXPECT_NEAR(dla[1], full - m.mean_correct_logit({{1, 0}}), 1e-10);
}

TEST(DirectLogit, WithLayerNormTheFrozenScaleStillSumsOverEverything) {
  // Frozen LayerNorm is linear: the heads' shares are finite and the model is untouched.
  RandomModel m(2, /*layernorm=*/true, /*attn_only=*/false);
  const auto before = m.model.parameters()[0].value().clone();
  const std::vector<double> dla = direct_logit_attribution(m.model, m.examples());
  ASSERT_EQ(dla.size(), 4u);
  for (double v : dla) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(core::max_abs_diff(m.model.parameters()[0].value(), before), 0.0);
}

TEST(AnalyzeModel, InterventionsFillEveryHeadAndTheVerdictWithoutChangingTheRest) {
  RandomModel m(2);
  const RunAnalysis plain = analyze_model(m.model, m.examples());
  std::vector<int32_t> other = m.tokens;
  for (auto& t : other) t = (t + 2) % 6;
  AnalysisOptions o;
  o.interventions = true;
  o.corruption = {other, {}};
  o.corruption_text = "shifted tokens.";
  const RunAnalysis run = analyze_model(m.model, m.examples(), o);
  ASSERT_TRUE(run.patching.has_value());
  EXPECT_EQ(run.patching->corruption, "shifted tokens.");
  for (const HeadAnalysis& h : run.heads) {
    EXPECT_TRUE(h.mean_ablation_delta_loss && h.resample_ablation_delta_loss && h.patch_restored && h.direct_logit);
  }
  for (std::size_t i = 0; i < run.heads.size(); ++i) {
    EXPECT_EQ(run.heads[i].ablation_delta_loss, plain.heads[i].ablation_delta_loss);
    EXPECT_FALSE(plain.heads[i].patch_restored.has_value());
  }
  EXPECT_EQ(run.position_loss.size(), static_cast<std::size_t>(RandomModel::T));
  EXPECT_FALSE(run.position_loss[0].has_value()) << "position 0 has no target";
}

}  // namespace
}  // namespace headlab::analysis


// Head analysis of real models: planted heads, ablation, sinks, no side
// effects, and the default demo's specialization.
#include "train/analysis.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "train/session.h"

namespace headlab::train {
namespace {

using layers::MultiHeadAttention;
using Projection = MultiHeadAttention::Projection;

enum class Pattern { previous, first, self, uniform };

// A 1-layer attention-only model whose positions are one-hot (token
// embeddings are zero) and whose head h is wired by hand to `patterns[h]`.
struct PlantedModel {
  static constexpr int64_t T = 6, D = 16, H = 2, DK = 8;
  core::Generator gen{0};
  layers::Transformer model;
  Batch batch;

  explicit PlantedModel(const std::vector<Pattern>& patterns, bool values = false)
      : model(layers::ModelSpec{.vocab = 4, .classes = 4, .max_seq_len = T, .layers = 1, .heads = H, .d_model = D,
                                .attn_only = true, .layernorm = false, .causal = true},
              gen, core::DType::f64) {
    model.parameter("tok_emb.weight").mutable_value().fill_(0);
    core::Tensor pos = model.parameter("pos_emb.weight").mutable_value();
    pos.fill_(0);
    for (int64_t t = 0; t < T; ++t) pos.set({t, t}, 1);
    auto& attn = model.attention(0);
    for (const char* p : {"q", "k", "v", "o"}) {
      model.parameter(std::string("blocks.0.attn.") + p + ".weight").mutable_value().fill_(0);
      model.parameter(std::string("blocks.0.attn.") + p + ".bias").mutable_value().fill_(0);
    }
    const double c = 40;  // sharp enough that softmax is one-hot to ~1e-6
    for (int64_t h = 0; h < H; ++h) {
      core::Tensor q = attn.head_weight(Projection::Q, h), k = attn.head_weight(Projection::K, h);
      for (int64_t t = 0; t < T; ++t) {
        switch (patterns[static_cast<std::size_t>(h)]) {
          case Pattern::previous:  // q_t = c e_t, k_s = e_{s+1}: score peaks at s = t - 1
            q.set({t, t}, c);
            if (t + 1 < DK) k.set({t + 1, t}, 1);
            break;
          case Pattern::first:  // q_t = c e_0, k_0 = e_0
            q.set({0, t}, c);
            if (t == 0) k.set({0, 0}, 1);
            break;
          case Pattern::self:
            q.set({t, t}, c);
            k.set({t, t}, 1);
            break;
          case Pattern::uniform:
            break;  // all scores 0
        }
      }
      if (values) {  // head h copies position features into output dims 8h..8h+5
        core::Tensor v = attn.head_weight(Projection::V, h), o = attn.head_output_weight(h);
        for (int64_t t = 0; t < T; ++t) {
          v.set({t, t}, 1);
          o.set({8 * h + t, t}, 1);
        }
      }
    }
    core::Generator data(7);
    batch.batch = 8;
    batch.seq_len = T;
    for (int64_t i = 0; i < batch.batch * T; ++i) {
      batch.tokens.push_back(static_cast<int32_t>(data.integer(0, 4)));
      batch.targets.push_back(i % T == 0 ? -1 : static_cast<int32_t>(data.integer(0, 4)));
    }
  }
};

TEST(AnalyzeModel, PlantedPreviousAndFirstTokenHeads) {
  PlantedModel p({Pattern::previous, Pattern::first});
  const RunAnalysis run = analyze_model(p.model, p.batch);
  EXPECT_GT(run.at(0, 0).scores.previous_token, 0.999);
  EXPECT_LT(run.at(0, 0).scores.first_token, 0.001);
  EXPECT_EQ(run.at(0, 0).label, Label::previous_token);
  EXPECT_GT(run.at(0, 1).scores.first_token, 0.999);
  // Its values are zero, so ablating it changes nothing: an attention sink.
  EXPECT_NEAR(*run.at(0, 1).ablation_delta_loss, 0.0, 1e-12);
  EXPECT_EQ(run.at(0, 1).label, Label::sink);
}

TEST(AnalyzeModel, PlantedSelfAndUniformHeads) {
  PlantedModel p({Pattern::self, Pattern::uniform});
  const RunAnalysis run = analyze_model(p.model, p.batch);
  EXPECT_GT(run.at(0, 0).scores.self, 0.999);
  EXPECT_EQ(run.at(0, 0).label, Label::self);
  EXPECT_NEAR(run.at(0, 1).scores.entropy, 1.0, 1e-9);  // uniform over the visible keys
  EXPECT_EQ(run.at(0, 1).label, Label::diffuse);
}

TEST(AnalyzeModel, AblationEqualsTheModelWithoutThatHead) {
  PlantedModel p({Pattern::previous, Pattern::first}, /*values=*/true);
  const RunAnalysis run = analyze_model(p.model, p.batch);
  const EvalResult base = evaluate(p.model, p.batch);
  for (int64_t h = 0; h < 2; ++h) {
    // Removing head h by hand: zero the columns of W_O that read it.
    core::Tensor cols = p.model.attention(0).head_output_weight(h);
    const core::Tensor saved = cols.clone();
    cols.fill_(0);
    const EvalResult without = evaluate(p.model, p.batch);
    cols.copy_(saved);
    EXPECT_NEAR(*run.at(0, h).ablation_delta_loss, without.loss - base.loss, 1e-12) << h;
    EXPECT_NEAR(*run.at(0, h).ablation_delta_acc, without.accuracy - base.accuracy, 1e-12) << h;
    EXPECT_GT(*run.at(0, h).importance, 0.0) << h;
  }
}

TEST(AnalyzeModel, LeavesModelAndCachedAttentionUntouched) {
  PlantedModel p({Pattern::previous, Pattern::first}, true);
  Batch other = p.batch;
  other.batch = 2;
  other.tokens.resize(12);
  other.targets.resize(12);
  (void)evaluate(p.model, other);  // caches the attention of a different batch
  const core::Tensor cached = p.model.attention(0).last_attention().clone();
  std::vector<core::Tensor> weights;
  for (const auto& param : p.model.parameters()) weights.push_back(param.value().clone());
  p.model.train();
  (void)analyze_model(p.model, p.batch);
  EXPECT_TRUE(p.model.is_training());
  EXPECT_EQ(core::max_abs_diff(p.model.attention(0).last_attention(), cached), 0.0);
  const auto params = p.model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(core::max_abs_diff(params[i].value(), weights[i]), 0.0);
    EXPECT_FALSE(params[i].has_grad());
    EXPECT_TRUE(params[i].requires_grad());
  }
  EXPECT_EQ(p.model.attention(0).gates().value().to_vector(), (std::vector<double>{1, 1}));
  EXPECT_FALSE(p.model.attention(0).gates().requires_grad());
}

TEST(AnalyzeModel, DefaultDemoSpecializesIntoPreviousAndFirstTokenHeads) {
  TrainConfig c;  // the default demo, as `headlab train` runs it
  c.seed = 0;
  c.steps = 300;
  Session s(c);
  for (int64_t i = 0; i < c.steps; ++i) s.step();
  const RunAnalysis run = analyze_model(s.model(), s.eval_batch());
  EXPECT_GE(*run.accuracy, 0.99);
  std::vector<Label> labels = {run.at(0, 0).label, run.at(0, 1).label};
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<Label>{Label::previous_token, Label::first_token}))
      << label_name(labels[0]) << ", " << label_name(labels[1]);
  EXPECT_TRUE(run.verdict.specialized);
}

}  // namespace
}  // namespace headlab::train

// Head analysis of real models: planted heads, ablation, sinks, and no side
// effects on the model (also from several threads at once).
#include "analysis/analyze_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "analysis/ablation.h"
#include "analysis/heads_json.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

using layers::MultiHeadAttention;
using Projection = MultiHeadAttention::Projection;

enum class Planted { previous, first, self, uniform };

// A 1-layer attention-only model whose positions are one-hot (token
// embeddings are zero) and whose head h is wired by hand to `patterns[h]`.
struct PlantedModel {
  static constexpr int64_t T = 6, DK = 8;
  int64_t H;  // one head per pattern, d_model = H * DK
  core::Generator gen{0};
  layers::Transformer model;
  std::vector<int32_t> tokens, targets;  // [8, T]

  Examples examples() const { return {8, T, tokens, targets}; }

  explicit PlantedModel(const std::vector<Planted>& patterns, bool values = false)
      : H(static_cast<int64_t>(patterns.size())),
        model(layers::ModelSpec{.vocab = 4, .classes = 4, .max_seq_len = T, .layers = 1, .heads = H,
                                .d_model = H * DK, .attn_only = true, .layernorm = false, .causal = true},
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
          case Planted::previous:  // q_t = c e_t, k_s = e_{s+1}: score peaks at s = t - 1
            q.set({t, t}, c);
            if (t + 1 < DK) k.set({t + 1, t}, 1);
            break;
          case Planted::first:  // q_t = c e_0, k_0 = e_0
            q.set({0, t}, c);
            if (t == 0) k.set({0, 0}, 1);
            break;
          case Planted::self:
            q.set({t, t}, c);
            k.set({t, t}, 1);
            break;
          case Planted::uniform:
            break;  // all scores 0
        }
      }
      if (values) {  // head h copies position features into output dims 8h..8h+5
        core::Tensor v = attn.head_weight(Projection::V, h), o = attn.head_output_weight(h);
        for (int64_t t = 0; t < T; ++t) {
          v.set({t, t}, 1);
          o.set({DK * h + t, t}, 1);
        }
      }
    }
    core::Generator data(7);
    for (int64_t i = 0; i < 8 * T; ++i) {
      tokens.push_back(static_cast<int32_t>(data.integer(0, 4)));
      targets.push_back(i % T == 0 ? -1 : static_cast<int32_t>(data.integer(0, 4)));
    }
  }
};

TEST(AnalyzeModel, PlantedPreviousAndFirstTokenHeads) {
  PlantedModel p({Planted::previous, Planted::first});
  const RunAnalysis run = analyze_model(p.model, p.examples());
  EXPECT_GT(run.at(0, 0).scores.at("previous-token"), 0.999);
  EXPECT_LT(run.at(0, 0).scores.at("first-token"), 0.001);
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("previous-token"));
  EXPECT_GT(run.at(0, 1).scores.at("first-token"), 0.999);
  // Its values are zero, so ablating it changes nothing: an attention sink.
  EXPECT_NEAR(*run.at(0, 1).ablation_delta_loss, 0.0, 1e-12);
  EXPECT_EQ(run.at(0, 1).label, Label::sink());
}

TEST(AnalyzeModel, PlantedSelfAndUniformHeads) {
  PlantedModel p({Planted::self, Planted::uniform});
  const RunAnalysis run = analyze_model(p.model, p.examples());
  EXPECT_GT(run.at(0, 0).scores.at("self"), 0.999);
  EXPECT_EQ(run.at(0, 0).label, Label::pattern("self"));
  EXPECT_NEAR(run.at(0, 1).scores.entropy, 1.0, 1e-9);  // uniform over the visible keys
  EXPECT_EQ(run.at(0, 1).label, Label::diffuse());
}

TEST(AnalyzeModel, AblationEqualsTheModelWithoutThatHead) {
  PlantedModel p({Planted::previous, Planted::first}, /*values=*/true);
  const RunAnalysis run = analyze_model(p.model, p.examples());
  const EvalResult base = evaluate(p.model, p.examples());
  for (int64_t h = 0; h < 2; ++h) {
    // Removing head h by hand: zero the columns of W_O that read it.
    core::Tensor cols = p.model.attention(0).head_output_weight(h);
    const core::Tensor saved = cols.clone();
    cols.fill_(0);
    const EvalResult without = evaluate(p.model, p.examples());
    cols.copy_(saved);
    EXPECT_NEAR(*run.at(0, h).ablation_delta_loss, without.loss - base.loss, 1e-12) << h;
    EXPECT_NEAR(*run.at(0, h).ablation_delta_acc, without.accuracy - base.accuracy, 1e-12) << h;
    EXPECT_GT(*run.at(0, h).importance, 0.0) << h;
  }
}

TEST(AnalyzeModel, ARolesSetOfThreeIsAlsoAblatedWithoutEachMember) {
  PlantedModel p({Planted::previous, Planted::previous, Planted::previous}, /*values=*/true);
  const RunAnalysis run = analyze_model(p.model, p.examples());
  ASSERT_EQ(run.set_ablations.size(), 1u);
  const SetAblation& set = run.set_ablations[0];
  ASSERT_EQ(set.heads, (std::vector<std::size_t>{0, 1, 2}));
  ASSERT_EQ(set.without.size(), 3u);
  const EvalResult base = evaluate(p.model, p.examples());
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<std::size_t> rest = set.heads;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(k));
    const Ablation a = ablate_set(p.model, p.examples(), base, rest);
    EXPECT_NEAR(set.without[k].delta_loss, a.delta_loss, 1e-12) << k;
    EXPECT_NEAR(set.without[k].delta_accuracy, a.delta_accuracy, 1e-12) << k;
  }
  // With two heads the other head's own ablation is the set without one:
  // nothing more is run.
  PlantedModel two({Planted::previous, Planted::previous}, true);
  const RunAnalysis pair = analyze_model(two.model, two.examples());
  ASSERT_EQ(pair.set_ablations.size(), 1u);
  EXPECT_TRUE(pair.set_ablations[0].without.empty());
  EXPECT_EQ(set_without(pair, pair.set_ablations[0], 0)->delta_loss, *pair.at(0, 1).ablation_delta_loss);
}

TEST(AnalyzeModel, LeavesModelUntouchedEvenMidTraining) {
  PlantedModel p({Planted::previous, Planted::first}, true);
  // Mid-training: every parameter holds a gradient that analysis must not touch.
  const auto params = p.model.parameters();
  std::vector<core::Tensor> weights, grads;
  for (const auto& param : params) {
    weights.push_back(param.value().clone());
    grads.push_back(core::Tensor::full(param.shape(), 0.25, param.dtype()));
    param.set_grad(grads.back().clone());
  }
  p.model.train();
  (void)analyze_model(p.model, p.examples());
  EXPECT_TRUE(p.model.is_training());
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(core::max_abs_diff(params[i].value(), weights[i]), 0.0);
    ASSERT_TRUE(params[i].has_grad());
    EXPECT_EQ(core::max_abs_diff(params[i].grad(), grads[i]), 0.0) << "importance leaked into a parameter's gradient";
    EXPECT_TRUE(params[i].requires_grad());
  }
}

TEST(AnalyzeModel, SeveralThreadsCanAnalyzeOneModelAtOnce) {
  PlantedModel p({Planted::previous, Planted::first}, true);
  const nlohmann::json alone = analyze_model(p.model, p.examples());
  std::vector<nlohmann::json> results(3);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&p, &r] { r = analyze_model(p.model, p.examples()); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, alone);
}

}  // namespace
}  // namespace headlab::analysis

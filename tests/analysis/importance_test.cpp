// Importance that does not vanish on a solved task, its per-layer
// normalization, the pruning curve, and how the views show them.
#include "analysis/importance.h"

#include <gtest/gtest.h>

#include <cmath>

#include "analysis/analyze_model.h"
#include "analysis/circuit_text.h"
#include "analysis/pruning.h"
#include "analysis/text_report.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

using Projection = layers::MultiHeadAttention::Projection;

// One layer, two heads, T = 3, targets at position 0 only (the token itself).
// Head 0 copies the token into dims 4..7, which the unembedding reads with
// gain `scale`; head 1 does nothing. At scale 30 the model is right with
// probability 1 - 1e-12: the loss gradient has vanished, yet removing head 0
// drops accuracy to chance.
struct Saturated {
  static constexpr int64_t B = 16, T = 3;
  core::Generator gen{0};
  layers::Transformer model;
  std::vector<int32_t> tokens, targets;
  Examples examples() const { return {B, T, tokens, targets}; }

  explicit Saturated(double scale)
      : model(layers::ModelSpec{.vocab = 4, .classes = 4, .max_seq_len = T, .layers = 1, .heads = 2, .d_model = 8,
                                .attn_only = true, .layernorm = false, .causal = true},
              gen, core::DType::f64) {
    for (auto& [name, p] : model.named_parameters()) p.mutable_value().fill_(0);
    auto& attn = model.attention(0);
    for (int64_t t = 0; t < 4; ++t) {
      model.parameter("tok_emb.weight").mutable_value().set({t, t}, 1);
      attn.head_weight(Projection::V, 0).set({t, t}, 1);
      attn.head_output_weight(0).set({4 + t, t}, 1);
      model.parameter("head.weight").mutable_value().set({t, 4 + t}, scale);
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < T; ++p) {
        tokens.push_back(static_cast<int32_t>((b * 7 + p * 3) % 4));
        targets.push_back(p == 0 ? tokens.back() : -1);
      }
  }
};

TEST(GateImportance, OnTheLossVanishesOnASolvedTaskButNotOnTheMargin) {
  const Saturated s(30);
  const std::vector<double> loss = gate_importance(s.model, s.examples(), 64);
  const std::vector<double> margin = gate_importance(s.model, s.examples(), 64, ImportanceObjective::margin);
  EXPECT_LT(loss[0], 1e-9) << "the vanishing gradient this fixes";
  EXPECT_NEAR(margin[0], 30.0, 1e-9) << "the margin is 30 g - log 3";
  EXPECT_EQ(loss[1], 0.0);
  EXPECT_EQ(margin[1], 0.0);
}

// The margin of one example at given gates, computed outside autograd.
double margin_at(const layers::Transformer& model, const Examples& ex, const std::vector<core::Tensor>& gates) {
  layers::Probe probe(model.num_layers());
  for (std::size_t l = 0; l < gates.size(); ++l) probe.layers[l].gates = autograd::Variable(gates[l]);
  const core::Tensor logits = model.forward(ex.tokens, 1, ex.seq_len, nullptr, &probe).value();
  double total = 0;
  int n = 0;
  for (int64_t p = 0; p < ex.seq_len; ++p) {
    const int32_t y = ex.targets[static_cast<std::size_t>(p)];
    if (y < 0) continue;
    double lse = 0;
    for (int64_t c = 0; c < logits.size(2); ++c)
      if (c != y) lse += std::exp(logits.at({0, p, c}));
    total += logits.at({0, p, y}) - std::log(lse);
    ++n;
  }
  return total / n;
}

TEST(GateImportance, OnTheMarginIsItsFiniteDifferenceGradient) {
  core::Generator gen(2);
  const layers::Transformer model(layers::ModelSpec{.vocab = 5, .classes = 5, .max_seq_len = 4, .layers = 2,
                                                    .heads = 2, .d_model = 8, .causal = true},
                                  gen, core::DType::f64);
  const std::vector<int32_t> tokens = {1, 3, 0, 4}, targets = {-1, 2, 4, 1};
  const Examples ex{1, 4, tokens, targets};
  const std::vector<double> got = gate_importance(model, ex, 1, ImportanceObjective::margin);
  const double eps = 1e-6;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      std::vector<core::Tensor> up(2, core::Tensor::ones({2}, core::DType::f64)), down = up;
      up[static_cast<std::size_t>(l)] = core::Tensor::ones({2}, core::DType::f64);
      down[static_cast<std::size_t>(l)] = core::Tensor::ones({2}, core::DType::f64);
      up[static_cast<std::size_t>(l)].set({h}, 1 + eps);
      down[static_cast<std::size_t>(l)].set({h}, 1 - eps);
      const double fd = (margin_at(model, ex, up) - margin_at(model, ex, down)) / (2 * eps);
      EXPECT_NEAR(got[static_cast<std::size_t>(l * 2 + h)], std::abs(fd), 1e-6 * (1 + std::abs(fd))) << l << h;
    }
}

TEST(NormalizePerLayer, DividesEachLayerByItsEuclideanNorm) {
  const std::vector<double> n = normalize_per_layer({3, 4, 0, 0, 1, 0}, 2);
  const std::vector<double> want = {0.6, 0.8, 0, 0, 1, 0};
  for (std::size_t i = 0; i < n.size(); ++i) EXPECT_DOUBLE_EQ(n[i], want[i]);
  EXPECT_THROW(normalize_per_layer({1, 2, 3}, 2), std::invalid_argument);
}

TEST(HeadTable, ShowsAnImportanceThatAgreesWithTheAblation) {
  const Saturated s(30);
  const RunAnalysis run = analyze_model(s.model, s.examples());
  ASSERT_LT(*run.at(0, 0).ablation_delta_acc, -0.5);
  EXPECT_DOUBLE_EQ(*run.at(0, 0).importance_normalized, 1.0);
  EXPECT_DOUBLE_EQ(*run.at(0, 1).importance_normalized, 0.0);
  const std::string table = head_table(run);
  EXPECT_NE(table.find("-75.0 pts        1.00"), std::string::npos) << table;
  EXPECT_EQ(table.find("0.0000"), std::string::npos) << "no vanished gradient next to a 75-point ablation";
}

TEST(PruningCurve, RemovesTheLeastImportantFirstAndEndsWithEveryHeadGone) {
  const Saturated s(30);
  const std::vector<double> before = s.model.parameter("head.weight").value().to_vector();
  const EvalResult base = evaluate(s.model, s.examples());
  const PruningCurve c = pruning_curve(s.model, s.examples(), {1.0, 0.0}, 4, 7);
  EXPECT_EQ(c.order, (std::vector<int64_t>{1, 0}));
  ASSERT_EQ(c.loss.size(), 3u);
  ASSERT_EQ(c.random_accuracy.size(), 3u);
  EXPECT_EQ(c.random_orders, 4);
  EXPECT_DOUBLE_EQ(c.loss[0], base.loss);
  EXPECT_DOUBLE_EQ(c.accuracy[0], 1.0);
  EXPECT_DOUBLE_EQ(c.accuracy[1], 1.0) << "head 1 does nothing";
  EXPECT_NEAR(c.loss[2], std::log(4.0), 1e-12) << "no head: every logit is 0";
  EXPECT_DOUBLE_EQ(c.random_loss[0], c.loss[0]);
  EXPECT_NEAR(c.random_loss[2], c.loss[2], 1e-12);
  EXPECT_DOUBLE_EQ(c.random_accuracy[2], c.accuracy[2]);
  EXPECT_LE(c.random_accuracy[1], c.accuracy[1]);
  EXPECT_EQ(s.model.parameter("head.weight").value().to_vector(), before) << "the model is never changed";
  EXPECT_THROW(pruning_curve(s.model, s.examples(), {1.0}), std::invalid_argument);
}

TEST(CircuitText, ListsCopyingScoresAndThePruningCurve) {
  const Saturated s(30);
  const std::string text = circuit_text(analyze_model(s.model, s.examples()));
  EXPECT_NE(text.find("exact: attention-only, no LayerNorm"), std::string::npos) << text;
  EXPECT_NE(text.find("L0H0 1.00"), std::string::npos) << text;  // it copies exactly
  EXPECT_NE(text.find("heads removed"), std::string::npos);
  EXPECT_EQ(text.find("composition"), std::string::npos) << "one layer: nothing to compose";
  EXPECT_EQ(circuit_text(RunAnalysis{}), "");
}

}  // namespace
}  // namespace headlab::analysis

// Weight-based circuits on hand-built weights with known answers: QK and OV
// circuits, the copying score, composition scores and their random baseline,
// and the LayerNorm fold.
#include "analysis/circuits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "analysis/analyze_model.h"
#include "analysis/composition.h"
#include "analysis/heads_json.h"
#include "core/ops.h"

namespace headlab::analysis {
namespace {

using Projection = layers::MultiHeadAttention::Projection;
using core::Tensor;

// An f64 model with every parameter 0, to be wired by hand.
struct Blank {
  core::Generator gen{0};
  layers::Transformer model;
  explicit Blank(layers::ModelSpec spec) : model(spec, gen, core::DType::f64) {
    for (auto& [name, p] : model.named_parameters())
      if (name.find("ln") == std::string::npos) p.mutable_value().fill_(0);
  }
  Tensor param(const std::string& name) const { return model.parameter(name).mutable_value(); }
  Tensor w(int64_t layer, Projection p, int64_t head) const { return model.attention(layer).head_weight(p, head); }
  Tensor o(int64_t layer, int64_t head) const { return model.attention(layer).head_output_weight(head); }
};

layers::ModelSpec spec(int64_t layers, bool layernorm = false) {
  return {.vocab = 4, .classes = 4, .max_seq_len = 4, .layers = layers, .heads = 2, .d_model = 8,
          .attn_only = true, .layernorm = layernorm, .causal = true};
}

// Token t -> e_t; head 0 of layer 0 reads dims 0..3 into its values, writes
// them back to dims 4..7 through `map` (o[4 + i][j] = map[i][j]); W_U reads dims 4..7.
Blank ov_model(const std::vector<std::vector<double>>& map) {
  Blank b(spec(1));
  for (int64_t t = 0; t < 4; ++t) {
    b.param("tok_emb.weight").set({t, t}, 1);
    b.w(0, Projection::V, 0).set({t, t}, 1);
    b.param("head.weight").set({t, 4 + t}, 1);
    for (int64_t j = 0; j < 4; ++j) b.o(0, 0).set({4 + t, j}, map[static_cast<std::size_t>(t)][static_cast<std::size_t>(j)]);
  }
  return b;
}

const std::vector<std::vector<double>> kIdentity = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};

TEST(CopyingScore, OfEigenvaluesIsThePositiveShareOfTheirMass) {
  EXPECT_DOUBLE_EQ(*copying_score({1.0, 2.0}), 1.0);
  EXPECT_DOUBLE_EQ(*copying_score({-1.0, -2.0}), 0.0);
  EXPECT_DOUBLE_EQ(*copying_score({3.0, -1.0}), 0.75);
  EXPECT_NEAR(*copying_score({std::complex<double>(1, 1), std::complex<double>(1, -1)}), 1 / std::sqrt(2.0), 1e-15);
  EXPECT_FALSE(copying_score({0.0, 0.0}).has_value());
}

TEST(OvCircuit, OfAnExactCopyingHeadIsTheIdentityWithCopyingScoreOne) {
  const Blank b = ov_model(kIdentity);
  const CircuitWeights w = circuit_weights(b.model);
  const Tensor ov = ov_circuit(w, 0, 0);
  ASSERT_EQ(ov.shape(), (core::Shape{4, 4}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(ov.at({i, j}), i == j ? 1.0 : 0.0);
  EXPECT_NEAR(*ov_copying_score(w, 0, 0), 1.0, 1e-12);
  EXPECT_FALSE(ov_copying_score(w, 0, 1).has_value()) << "a head that writes nothing has no eigenvalue mass";
}

TEST(OvCircuit, ASuppressingHeadScoresZeroAndAPermutationItsPositiveShare) {
  std::vector<std::vector<double>> negated = kIdentity;
  for (auto& row : negated)
    for (double& v : row) v = -v;
  EXPECT_NEAR(*ov_copying_score(circuit_weights(ov_model(negated).model), 0, 0), 0.0, 1e-12);
  // A 4-cycle t -> t+1: eigenvalues 1, i, -1, -i, so the score is 1/4.
  const std::vector<std::vector<double>> cycle = {{0, 0, 0, 1}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}};
  const CircuitWeights w = circuit_weights(ov_model(cycle).model);
  EXPECT_NEAR(*ov_copying_score(w, 0, 0), 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(ov_circuit(w, 0, 0).at({0, 1}), 1.0) << "token 0 raises the logit of token 1";
}

TEST(OvCircuit, HasNoCopyingScoreWhenClassesAreNotTokens) {
  layers::ModelSpec s = spec(1);
  s.classes = 3;
  Blank b(s);
  b.w(0, Projection::V, 0).set({0, 0}, 1);
  EXPECT_FALSE(ov_copying_score(circuit_weights(b.model), 0, 0).has_value());
  EXPECT_EQ(ov_circuit(circuit_weights(b.model), 0, 0).shape(), (core::Shape{4, 3}));
}

TEST(QkCircuit, ScoresTokenPairsAndPositionPairsApart) {
  Blank b(spec(1));
  for (int64_t t = 0; t < 4; ++t) {
    b.param("tok_emb.weight").set({t, t}, 1);
    b.param("pos_emb.weight").set({t, 4 + t}, 1);
  }
  b.w(0, Projection::Q, 1).set({0, 2}, 3.0);  // the query reads token 2 ...
  b.w(0, Projection::K, 1).set({0, 1}, 1.0);  // ... the key token 1
  b.w(0, Projection::Q, 1).set({1, 4}, 2.0);  // the query reads position 0 ...
  b.w(0, Projection::K, 1).set({1, 7}, 1.0);  // ... the key position 3
  const CircuitWeights w = circuit_weights(b.model);
  const Tensor tok = qk_token_circuit(w, 0, 1), pos = qk_position_circuit(w, 0, 1);
  const double scale = 1 / std::sqrt(4.0);  // d_k = 4
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_DOUBLE_EQ(tok.at({i, j}), i == 2 && j == 1 ? 3 * scale : 0.0);
      EXPECT_DOUBLE_EQ(pos.at({i, j}), i == 0 && j == 3 ? 2 * scale : 0.0);
    }
}

// Two layers: L0H0 and L0H1 read dim 5 and write dim 0 and dim 1 (rank 1).
// L1H0's key reads dim 0 (L0H0's output) and its value dim 1 (L0H1's);
// L1H1's query reads dim 0.
Blank composed() {
  Blank b(spec(2));
  b.w(0, Projection::V, 0).set({0, 5}, 1);
  b.o(0, 0).set({0, 0}, 1);
  b.w(0, Projection::V, 1).set({0, 5}, 1);
  b.o(0, 1).set({1, 0}, 1);
  b.w(1, Projection::Q, 0).set({0, 6}, 1);
  b.w(1, Projection::K, 0).set({0, 0}, 1);
  b.w(1, Projection::V, 0).set({0, 1}, 1);
  b.o(1, 0).set({7, 0}, 1);
  b.w(1, Projection::Q, 1).set({0, 0}, 2.5);
  b.w(1, Projection::K, 1).set({0, 6}, 1);
  b.w(1, Projection::V, 1).set({0, 6}, 1);
  b.o(1, 1).set({7, 0}, 1);
  return b;
}

const Composition& find(const std::vector<Composition>& all, int64_t wh, int64_t rh) {
  for (const Composition& c : all)
    if (c.writer_layer == 0 && c.writer_head == wh && c.reader_layer == 1 && c.reader_head == rh) return c;
  throw std::logic_error("pair not found");
}

TEST(Composition, IsOneWithTheHeadWhoseSubspaceIsReadAndZeroWithTheOther) {
  const std::vector<Composition> all = composition_scores(circuit_weights(composed().model));
  ASSERT_EQ(all.size(), 4u);  // 2 writers x 2 readers, no pair within a layer
  const Composition& k = find(all, 0, 0);
  EXPECT_NEAR(k.k, 1.0, 1e-12);
  EXPECT_NEAR(k.q, 0.0, 1e-12);
  EXPECT_NEAR(k.v, 0.0, 1e-12);
  const Composition& v = find(all, 1, 0);
  EXPECT_NEAR(v.v, 1.0, 1e-12);
  EXPECT_NEAR(v.k, 0.0, 1e-12);
  const Composition& q = find(all, 0, 1);
  EXPECT_NEAR(q.q, 1.0, 1e-12) << "the scale of a weight does not matter";
  EXPECT_NEAR(q.k, 0.0, 1e-12);
  EXPECT_NEAR(find(all, 1, 1).q, 0.0, 1e-12);
}

TEST(Composition, MatchesTheDenseFormulaOnRandomWeights) {
  core::Generator gen(3);
  layers::Transformer model(spec(2), gen, core::DType::f64);
  const CircuitWeights w = circuit_weights(model);
  const HeadWeights &a = w.at(0, 1), &r = w.at(1, 0);
  auto mm = [](const Tensor& x, const Tensor& y) { return core::matmul(x, y); };
  auto fro = [](const Tensor& x) { return std::sqrt(core::sum(core::mul(x, x)).item()); };
  const Tensor wqk = mm(r.q.transpose(0, 1), r.k), wov = mm(a.o, a.v), wov_r = mm(r.o, r.v);
  const std::vector<Composition> all = composition_scores(w);
  const Composition& c = find(all, 1, 0);
  EXPECT_NEAR(c.q, fro(mm(wqk.transpose(0, 1), wov)) / (fro(wqk) * fro(wov)), 1e-12);
  EXPECT_NEAR(c.k, fro(mm(wqk, wov)) / (fro(wqk) * fro(wov)), 1e-12);
  EXPECT_NEAR(c.v, fro(mm(wov_r, wov)) / (fro(wov_r) * fro(wov)), 1e-12);
}

TEST(CompositionBaseline, IsReproducibleAndWhatRandomHeadsScore) {
  const double base = composition_baseline(8, 4);
  EXPECT_EQ(base, composition_baseline(8, 4));
  EXPECT_GT(base, 0.05);
  EXPECT_LT(base, 0.6);
  EXPECT_LT(composition_baseline(64, 8), base) << "wider residual streams leave random heads less overlap";
  // Random models' scores average near the baseline.
  double total = 0;
  int n = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    core::Generator gen(seed);
    for (const Composition& c : composition_scores(circuit_weights(layers::Transformer(spec(2), gen, core::DType::f64)))) {
      total += c.q + c.k + c.v;
      n += 3;
    }
  }
  EXPECT_NEAR(total / n, base, 0.03);
  EXPECT_THROW(composition_baseline(0, 4), std::invalid_argument);
}

// With LayerNorm, W_Q is read as W_Q diag(g) P (P centers).
TEST(LayerNormFold, ScalesByTheGainAndRemovesTheMeanDirection) {
  Blank b(spec(1, /*layernorm=*/true));
  core::Generator gen(9);
  for (auto& [name, p] : b.model.named_parameters())
    if (name.find("weight") != std::string::npos) p.mutable_value().copy_(gen.normal(p.shape(), 0, 1, core::DType::f64));
  const CircuitWeights w = circuit_weights(b.model);
  EXPECT_TRUE(w.layernorm_folded);
  EXPECT_FALSE(w.mlp_ignored);
  const Tensor q = b.w(0, Projection::Q, 1), g = b.param("blocks.0.ln1.weight");
  for (int64_t i = 0; i < 4; ++i) {
    double mean = 0;
    for (int64_t j = 0; j < 8; ++j) mean += q.at({i, j}) * g.at({j}) / 8;
    for (int64_t j = 0; j < 8; ++j) EXPECT_NEAR(w.at(0, 1).q.at({i, j}), q.at({i, j}) * g.at({j}) - mean, 1e-12);
  }
  // Adding the same number to every coordinate of every embedding changes
  // nothing after LayerNorm, and nothing in the folded circuits.
  const Tensor before = qk_token_circuit(w, 0, 0), ov_before = ov_circuit(w, 0, 0);
  Tensor e = b.param("tok_emb.weight");
  e.copy_(core::add(e, 0.7));
  const CircuitWeights shifted = circuit_weights(b.model);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_NEAR(qk_token_circuit(shifted, 0, 0).at({i, j}), before.at({i, j}), 1e-12);
      EXPECT_NEAR(ov_circuit(shifted, 0, 0).at({i, j}), ov_before.at({i, j}), 1e-12);
    }
}

// The fold against the real forward pass: a 1-layer attention-only model with
// LayerNorm, zero biases and no positions, on embeddings of equal variance
// (so 1/sigma is one number s): the attention logit of query token a on key
// token c is s^2 * QK[a, c], so log(A[1, 0] / A[1, 1]) = s^2 (QK[a, c] - QK[a, a]).
TEST(LayerNormFold, PredictsTheForwardPassAttentionUpToTheStatedScale) {
  Blank b(spec(1, /*layernorm=*/true));
  core::Generator gen(4);
  for (const char* p : {"q", "k"})
    b.param(std::string("blocks.0.attn.") + p + ".weight").copy_(gen.normal({8, 8}, 0, 1, core::DType::f64));
  b.param("blocks.0.ln1.weight").copy_(gen.normal({8}, 1, 0.3, core::DType::f64));
  // Rows: a random vector, centered and scaled to variance 1, permuted per token.
  Tensor e = b.param("tok_emb.weight");
  const std::vector<double> base = {1.3, -0.4, 0.9, -1.7, 0.2, 0.6, -0.8, -0.1};
  double mean = 0, var = 0;
  for (double v : base) mean += v / 8;
  for (double v : base) var += (v - mean) * (v - mean) / 8;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t j = 0; j < 8; ++j) e.set({t, j}, (base[static_cast<std::size_t>((j + 3 * t) % 8)] - mean) / std::sqrt(var));
  const double s2 = 1.0 / (1.0 + 1e-5);  // 1/sigma^2 with LayerNorm's eps
  const Tensor qk = qk_token_circuit(circuit_weights(b.model), 0, 0);
  for (int32_t a = 0; a < 4; ++a)
    for (int32_t c = 0; c < 4; ++c) {
      if (a == c) continue;
      layers::Probe probe(1);
      const std::vector<int32_t> tokens = {c, a};
      b.model.forward(tokens, 1, 2, nullptr, &probe);
      const Tensor& att = probe.layers[0].attention;  // [1, h, 2, 2]
      const double observed = std::log(att.at({0, 0, 1, 0}) / att.at({0, 0, 1, 1}));
      EXPECT_NEAR(observed, s2 * (qk.at({a, c}) - qk.at({a, a})), 1e-9) << a << " " << c;
    }
}

TEST(HeadsJson, CarriesTheCircuitsAndThePruningCurveAndReadsFilesWithout) {
  const Blank b = composed();
  const std::vector<int32_t> tokens = {0, 1, 2, 3, 3, 2, 1, 0}, targets = {1, 2, 3, -1, 2, 1, 0, -1};
  const RunAnalysis run = analyze_model(b.model, {2, 4, tokens, targets});
  ASSERT_EQ(run.composition.size(), 4u);
  ASSERT_TRUE(run.pruning.has_value());
  EXPECT_EQ(run.pruning->loss.size(), 5u);
  EXPECT_TRUE(run.composition_baseline.has_value());
  const nlohmann::json j = run;
  EXPECT_EQ(j.at("circuits").at("composition")[0].at("writer"), "L0H0");
  EXPECT_EQ(j.at("circuits").at("composition")[0].at("reader"), "L1H0");
  EXPECT_NEAR(j.at("circuits").at("composition")[0].at("k").get<double>(), 1.0, 1e-12);
  EXPECT_EQ(j.at("pruning").at("order").size(), 4u);
  const RunAnalysis back = nlohmann::json::parse(j.dump()).get<RunAnalysis>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.pruning->order, run.pruning->order);
  const nlohmann::json compact = compact_json(run);
  EXPECT_NEAR(compact.at("composition").at("L0H0>L1H0").at("k").get<double>(), 1.0, 1e-12);

  nlohmann::json old = j;
  old.erase("circuits");
  old.erase("pruning");
  const RunAnalysis before = old.get<RunAnalysis>();
  EXPECT_TRUE(before.composition.empty());
  EXPECT_FALSE(before.pruning.has_value());
  nlohmann::json bad = j;
  bad["circuits"]["composition"][0]["reader"] = "L7H0";
  EXPECT_THROW(bad.get<RunAnalysis>(), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::analysis

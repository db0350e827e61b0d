// Linear, LayerNorm, Embedding, PositionalEmbedding, Softmax and MLP: shapes,
// values against the formulas, initialization and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/random.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/softmax.h"

namespace headlab::layers {
namespace {

using autograd::Variable;
using core::DType;
using core::Tensor;

TEST(Linear, ComputesXTimesWeightTransposedPlusBias) {
  core::Generator gen(0);
  Linear lin(LinearOptions{.in_features = 3, .out_features = 2}, gen, DType::f64);
  lin.weight().mutable_value().copy_(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64));
  lin.bias().mutable_value().copy_(Tensor::from_vector({10, 20}, {2}, DType::f64));
  const Tensor x = Tensor::from_vector({1, 0, -1, 2, 1, 0}, {2, 1, 3}, DType::f64);
  const Tensor y = lin.forward(Variable(x)).value();
  ASSERT_EQ(y.shape(), (core::Shape{2, 1, 2}));
  EXPECT_EQ(y.to_vector(), (std::vector<double>{1 - 3 + 10, 4 - 6 + 20, 2 + 2 + 10, 8 + 5 + 20}));
}

TEST(Linear, HasWeightOutByInAndBiasOut) {
  core::Generator gen(0);
  Linear lin(LinearOptions{.in_features = 3, .out_features = 5}, gen);
  const auto params = lin.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second.shape(), (core::Shape{5, 3}));
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(params[1].second.shape(), (core::Shape{5}));
  EXPECT_EQ(lin.weight().dtype(), DType::f32);
}

TEST(Linear, BiasCanBeTurnedOff) {
  core::Generator gen(0);
  Linear lin(LinearOptions{.in_features = 3, .out_features = 5, .bias = false}, gen, DType::f64);
  EXPECT_EQ(lin.named_parameters().size(), 1u);
  EXPECT_FALSE(lin.bias().defined());
  const Tensor y = lin.forward(Variable(Tensor::zeros({4, 3}, DType::f64))).value();
  EXPECT_EQ(core::max_abs_diff(y, Tensor::zeros({4, 5}, DType::f64)), 0.0);
}

TEST(Linear, InitializesWeightsNormalWithStd002AndBiasZero) {
  core::Generator gen(42);
  Linear lin(LinearOptions{.in_features = 200, .out_features = 100}, gen, DType::f64);
  const Tensor w = lin.weight().value();
  const double mean = core::mean(w).item();
  const double std = std::sqrt(core::mean(core::pow(core::add(w, -mean), 2.0)).item());
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(std, 0.02, 0.0005);
  EXPECT_EQ(core::max_abs_diff(lin.bias().value(), Tensor::zeros({100}, DType::f64)), 0.0);
}

TEST(Linear, SameSeedGivesSameWeights) {
  core::Generator g1(7), g2(7), g3(8);
  Linear a(LinearOptions{.in_features = 4, .out_features = 4}, g1), b(LinearOptions{.in_features = 4, .out_features = 4}, g2), c(LinearOptions{.in_features = 4, .out_features = 4}, g3);
  EXPECT_EQ(core::max_abs_diff(a.weight().value(), b.weight().value()), 0.0);
  EXPECT_GT(core::max_abs_diff(a.weight().value(), c.weight().value()), 0.0);
}

TEST(Linear, WrongInputWidthIsAnErrorNamingTheShapes) {
  core::Generator gen(0);
  Linear lin(LinearOptions{.in_features = 3, .out_features = 2}, gen);
  try {
    lin.forward(Variable(Tensor::zeros({2, 4})));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Linear(LinearOptions{.in_features = 0, .out_features = 2}, gen), std::invalid_argument);
}

TEST(LayerNorm, NormalizesTheLastAxisThenScalesAndShifts) {
  core::Generator gen(0);
  LayerNorm ln(LayerNormOptions{.normalized_size = 4}, gen, DType::f64);
  EXPECT_EQ(ln.options().eps, 1e-5);
  EXPECT_EQ(ln.weight().value().to_vector(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(ln.bias().value().to_vector(), (std::vector<double>{0, 0, 0, 0}));
  ln.weight().mutable_value().fill_(2.0);
  ln.bias().mutable_value().fill_(1.0);
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4}, DType::f64);
  const Tensor y = ln.forward(Variable(x)).value();
  // mean 2.5, biased variance 1.25
  const double rstd = 1.0 / std::sqrt(1.25 + 1e-5);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(y.at({0, i}), (static_cast<double>(i + 1) - 2.5) * rstd * 2.0 + 1.0, 1e-12);
  }
}

TEST(LayerNorm, WrongWidthIsAnError) {
  core::Generator gen(0);
  LayerNorm ln(LayerNormOptions{.normalized_size = 4}, gen);
  EXPECT_THROW(ln.forward(Variable(Tensor::zeros({2, 3}))), std::invalid_argument);
}

TEST(Embedding, LooksUpRowsOfTheTable) {
  core::Generator gen(0);
  Embedding emb(EmbeddingOptions{.num_embeddings = 5, .embedding_dim = 3}, gen, DType::f64);
  ASSERT_EQ(emb.weight().shape(), (core::Shape{5, 3}));
  const std::vector<int32_t> ids{4, 0, 4, 2};
  const Tensor y = emb.forward(ids, {2, 2}).value();
  ASSERT_EQ(y.shape(), (core::Shape{2, 2, 3}));
  const Tensor& w = emb.weight().value();
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(y.at({0, 0, c}), w.at({4, c}));
    EXPECT_EQ(y.at({0, 1, c}), w.at({0, c}));
    EXPECT_EQ(y.at({1, 0, c}), w.at({4, c}));
    EXPECT_EQ(y.at({1, 1, c}), w.at({2, c}));
  }
}

TEST(Embedding, IdOutOfRangeIsAnErrorNamingIt) {
  core::Generator gen(0);
  Embedding emb(EmbeddingOptions{.num_embeddings = 5, .embedding_dim = 3}, gen);
  const std::vector<int32_t> ids{1, 5};
  try {
    emb.forward(ids, {2});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("id 5"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> negative{-1};
  EXPECT_THROW(emb.forward(negative, {1}), std::invalid_argument);
  EXPECT_THROW(emb.forward(ids, {3}), std::invalid_argument);
}

TEST(PositionalEmbedding, GivesTheFirstSeqLenRows) {
  core::Generator gen(0);
  PositionalEmbedding pos(EmbeddingOptions{.num_embeddings = 6, .embedding_dim = 3}, gen, DType::f64);
  EXPECT_EQ(pos.max_seq_len(), 6);
  const Tensor y = pos.forward(4).value();
  ASSERT_EQ(y.shape(), (core::Shape{4, 3}));
  EXPECT_EQ(core::max_abs_diff(y, pos.weight().value().slice(0, 0, 4)), 0.0);
  try {
    pos.forward(7);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6"), std::string::npos) << e.what();
  }
}

TEST(Softmax, NormalizesOverTheChosenAxis) {
  Softmax sm(SoftmaxOptions{.axis = 0});
  const Tensor x = Tensor::from_vector({0, 1, std::log(3.0), 1}, {2, 2}, DType::f64);
  const Tensor y = sm.forward(Variable(x)).value();
  EXPECT_NEAR(y.at({0, 0}), 0.25, 1e-15);
  EXPECT_NEAR(y.at({1, 0}), 0.75, 1e-15);
  EXPECT_NEAR(y.at({0, 1}), 0.5, 1e-15);
  EXPECT_TRUE(sm.named_parameters().empty());
}

TEST(MLP, IsFc2OfExactGeluOfFc1) {
  core::Generator gen(3);
  MLP mlp(MLPOptions{.d_model = 4, .d_ff = 8}, gen, DType::f64);
  std::vector<std::string> names;
  for (auto& [name, p] : mlp.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(mlp.fc1().weight().shape(), (core::Shape{8, 4}));
  EXPECT_EQ(mlp.fc2().weight().shape(), (core::Shape{4, 8}));
  for (auto& p : mlp.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 1.0, DType::f64));

  const Tensor x = gen.normal({3, 4}, 0.0, 1.0, DType::f64);
  const Tensor h = core::matmul(x, mlp.fc1().weight().value().transpose(0, 1)) + mlp.fc1().bias().value();
  const Tensor g = h * 0.5 * (core::erf(h * (1.0 / std::sqrt(2.0))) + 1.0);
  const Tensor expected = core::matmul(g, mlp.fc2().weight().value().transpose(0, 1)) + mlp.fc2().bias().value();
  EXPECT_LT(core::max_abs_diff(mlp.forward(Variable(x)).value(), expected), 1e-12);
}

}  // namespace
}  // namespace headlab::layers

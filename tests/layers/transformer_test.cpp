// The decoder-only Transformer: parameter names and shapes (the checkpoint
// contract in docs/model.md), options, forward errors, masking end to end.
#include "layers/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/random.h"

namespace headlab::layers {
namespace {

using autograd::Variable;
using core::DType;
using core::Shape;
using core::Tensor;
using NamedShapes = std::vector<std::pair<std::string, Shape>>;

// V=7 tokens in, C=3 classes out, T<=6, d=8, h=2, d_ff=16.
// A small spec, after `change` if given.
ModelSpec small_spec(const std::function<void(ModelSpec&)>& change = {}) {
  ModelSpec spec{.vocab = 7, .classes = 3, .max_seq_len = 6, .layers = 2, .heads = 2, .d_model = 8, .d_ff = 16};
  if (change) change(spec);
  return spec;
}

NamedShapes names_and_shapes(const Module& m) {
  NamedShapes out;
  for (auto& [name, p] : m.named_parameters()) out.emplace_back(name, p.shape());
  return out;
}

// linear_weights() is the FLOP count's N (bench, the --threads 0 rule): the
// Linear weights the model really has, output head included.
TEST(Transformer, LinearWeightsCountsEveryLinearWeightOfTheModel) {
  const std::vector<std::function<void(ModelSpec&)>> changes = {
      {}, [](ModelSpec& s) { s.attn_only = true; }, [](ModelSpec& s) { s.d_ff = 0; },
      [](ModelSpec& s) { s.classes = 0; s.layers = 3; }};
  for (const auto& change : changes) {
    const ModelSpec spec = small_spec(change);
    core::Generator gen(1);
    const Transformer model(spec, gen);
    int64_t counted = 0;
    for (auto& [name, p] : model.named_parameters())
      if (p.dim() == 2 && name.find("emb") == std::string::npos) counted += p.numel();
    EXPECT_EQ(spec.linear_weights(), counted);
    const double tokens = 4.0 * static_cast<double>(spec.max_seq_len);
    EXPECT_DOUBLE_EQ(spec.train_flops_per_step(4),
                     tokens * (6.0 * static_cast<double>(counted) +
                               12.0 * static_cast<double>(spec.layers * spec.max_seq_len * spec.d_model)));
  }
}

TEST(Transformer, NamedParametersAreTheDocumentedList) {
  core::Generator gen(0);
  Transformer model(small_spec(), gen);
  const NamedShapes expected = {
      {"tok_emb.weight", {7, 8}},          {"pos_emb.weight", {6, 8}},
      {"blocks.0.ln1.weight", {8}},        {"blocks.0.ln1.bias", {8}},
      {"blocks.0.attn.q.weight", {8, 8}},  {"blocks.0.attn.q.bias", {8}},
      {"blocks.0.attn.k.weight", {8, 8}},  {"blocks.0.attn.k.bias", {8}},
      {"blocks.0.attn.v.weight", {8, 8}},  {"blocks.0.attn.v.bias", {8}},
      {"blocks.0.attn.o.weight", {8, 8}},  {"blocks.0.attn.o.bias", {8}},
      {"blocks.0.ln2.weight", {8}},        {"blocks.0.ln2.bias", {8}},
      {"blocks.0.mlp.fc1.weight", {16, 8}}, {"blocks.0.mlp.fc1.bias", {16}},
      {"blocks.0.mlp.fc2.weight", {8, 16}}, {"blocks.0.mlp.fc2.bias", {8}},
      {"blocks.1.ln1.weight", {8}},        {"blocks.1.ln1.bias", {8}},
      {"blocks.1.attn.q.weight", {8, 8}},  {"blocks.1.attn.q.bias", {8}},
      {"blocks.1.attn.k.weight", {8, 8}},  {"blocks.1.attn.k.bias", {8}},
      {"blocks.1.attn.v.weight", {8, 8}},  {"blocks.1.attn.v.bias", {8}},
      {"blocks.1.attn.o.weight", {8, 8}},  {"blocks.1.attn.o.bias", {8}},
      {"blocks.1.ln2.weight", {8}},        {"blocks.1.ln2.bias", {8}},
      {"blocks.1.mlp.fc1.weight", {16, 8}}, {"blocks.1.mlp.fc1.bias", {16}},
      {"blocks.1.mlp.fc2.weight", {8, 16}}, {"blocks.1.mlp.fc2.bias", {8}},
      {"ln_f.weight", {8}},                {"ln_f.bias", {8}},
      {"head.weight", {3, 8}},             {"head.bias", {3}},
  };
  EXPECT_EQ(names_and_shapes(model), expected);
  int64_t count = 0;
  for (auto& [name, shape] : expected) count += core::numel_of(shape);
  EXPECT_EQ(model.num_parameters(), count);
}

TEST(Transformer, AttentionOnlyModelHasNoLn2AndNoMlp) {
  core::Generator gen(0);
  Transformer model(small_spec([](ModelSpec& s) { s.attn_only = true; }), gen);
  const NamedShapes expected = {
      {"tok_emb.weight", {7, 8}},         {"pos_emb.weight", {6, 8}},
      {"blocks.0.ln1.weight", {8}},       {"blocks.0.ln1.bias", {8}},
      {"blocks.0.attn.q.weight", {8, 8}}, {"blocks.0.attn.q.bias", {8}},
      {"blocks.0.attn.k.weight", {8, 8}}, {"blocks.0.attn.k.bias", {8}},
      {"blocks.0.attn.v.weight", {8, 8}}, {"blocks.0.attn.v.bias", {8}},
      {"blocks.0.attn.o.weight", {8, 8}}, {"blocks.0.attn.o.bias", {8}},
      {"blocks.1.ln1.weight", {8}},       {"blocks.1.ln1.bias", {8}},
      {"blocks.1.attn.q.weight", {8, 8}}, {"blocks.1.attn.q.bias", {8}},
      {"blocks.1.attn.k.weight", {8, 8}}, {"blocks.1.attn.k.bias", {8}},
      {"blocks.1.attn.v.weight", {8, 8}}, {"blocks.1.attn.v.bias", {8}},
      {"blocks.1.attn.o.weight", {8, 8}}, {"blocks.1.attn.o.bias", {8}},
      {"ln_f.weight", {8}},               {"ln_f.bias", {8}},
      {"head.weight", {3, 8}},            {"head.bias", {3}},
  };
  EXPECT_EQ(names_and_shapes(model), expected);
}

TEST(Transformer, ModelWithoutLayerNormHasNoLayerNormParameters) {
  core::Generator gen(0);
  Transformer model(small_spec([](ModelSpec& s) { s.layers = 1; s.layernorm = false; }), gen);
  const NamedShapes expected = {
      {"tok_emb.weight", {7, 8}},          {"pos_emb.weight", {6, 8}},
      {"blocks.0.attn.q.weight", {8, 8}},  {"blocks.0.attn.q.bias", {8}},
      {"blocks.0.attn.k.weight", {8, 8}},  {"blocks.0.attn.k.bias", {8}},
      {"blocks.0.attn.v.weight", {8, 8}},  {"blocks.0.attn.v.bias", {8}},
      {"blocks.0.attn.o.weight", {8, 8}},  {"blocks.0.attn.o.bias", {8}},
      {"blocks.0.mlp.fc1.weight", {16, 8}}, {"blocks.0.mlp.fc1.bias", {16}},
      {"blocks.0.mlp.fc2.weight", {8, 16}}, {"blocks.0.mlp.fc2.bias", {8}},
      {"head.weight", {3, 8}},             {"head.bias", {3}},
  };
  EXPECT_EQ(names_and_shapes(model), expected);
}

TEST(Transformer, AttentionOnlyWithoutLayerNormIsEmbeddingsAttentionAndHead) {
  core::Generator gen(0);
  Transformer model(small_spec([](ModelSpec& s) { s.layers = 1; s.attn_only = true; s.layernorm = false; }), gen);
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"tok_emb.weight", "pos_emb.weight", "blocks.0.attn.q.weight",
                                             "blocks.0.attn.q.bias", "blocks.0.attn.k.weight", "blocks.0.attn.k.bias",
                                             "blocks.0.attn.v.weight", "blocks.0.attn.v.bias", "blocks.0.attn.o.weight",
                                             "blocks.0.attn.o.bias", "head.weight", "head.bias"}));
}

TEST(Transformer, ClassesDefaultToTheVocabulary) {
  EXPECT_EQ(ModelSpec{.vocab = 11}.resolved().classes, 11);
  EXPECT_EQ((ModelSpec{.vocab = 11, .classes = 4}.resolved().classes), 4);
  EXPECT_EQ(ModelSpec{.d_model = 32}.resolved().d_ff, 128);
  EXPECT_EQ((ModelSpec{.heads = 4, .d_model = 32}.d_k()), 8);
}

TEST(Transformer, ValidateRejectsNonsenseNamingTheOption) {
  auto expect_error_naming = [](const ModelSpec& options, const std::vector<std::string>& words) {
    try {
      options.validate();
      ADD_FAILURE() << "expected std::invalid_argument naming " << words.front();
    } catch (const std::invalid_argument& e) {
      for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  expect_error_naming(small_spec([](ModelSpec& s) { s.vocab = 0; }), {"vocab", "0"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.classes = -2; }), {"classes", "-2"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.max_seq_len = 0; }), {"max_seq_len"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.layers = 0; }), {"layers"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.heads = 0; }), {"heads"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.d_model = -8; }), {"d_model", "-8"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.d_ff = -1; }), {"d_ff", "-1"});
  expect_error_naming(small_spec([](ModelSpec& s) { s.d_model = 10; s.heads = 4; }), {"10", "4"});
  EXPECT_NO_THROW(small_spec().validate());
  EXPECT_NO_THROW(small_spec([](ModelSpec& s) { s.attn_only = true; s.d_ff = 0; }).validate());
  core::Generator gen(0);
  EXPECT_THROW(Transformer(small_spec([](ModelSpec& s) { s.d_model = 10; s.heads = 4; }), gen), std::invalid_argument);
}

// The one "heads divides d_model" check suggests values that fit, under the
// names the caller gives the fields.
TEST(Transformer, IndivisibleHeadsSuggestTheNearestFits) {
  const ModelSpec spec = small_spec([](ModelSpec& s) { s.d_model = 10; s.heads = 4; });
  try {
    spec.validate();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("try heads 2 or 5, or d_model 12"), std::string::npos) << e.what();
  }
  try {
    spec.validate([](const std::string& field) { return "--" + field; });
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--d_model 10 is not divisible by --heads 4"), std::string::npos) << e.what();
  }
}

// At the largest int64 the suggestion must not overflow (UBSan): a
// checkpoint's spec can hold any size (the CLI refuses such flags first).
TEST(Transformer, IndivisibleHeadsAtTheLargestSizesSuggestWithoutOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  using Case = std::tuple<int64_t, int64_t, std::string>;
  for (const auto& [d_model, heads, suggestion] : {Case{kMax, 2, "try heads 1 or 7"}, Case{16, kMax, "try heads 16"}}) {
    const ModelSpec spec = small_spec([&](ModelSpec& s) { s.d_model = d_model; s.heads = heads; });
    try {
      spec.validate();
      FAIL() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(suggestion), std::string::npos) << e.what();
    }
  }
}

TEST(Transformer, ForwardGivesLogitsBatchByTimeByClasses) {
  core::Generator gen(1);
  Transformer model(small_spec(), gen);
  const std::vector<int32_t> tokens{0, 1, 2, 3, 4, 5, 6, 0, 1, 2};
  const Variable logits = model.forward(tokens, 2, 5);
  EXPECT_EQ(logits.shape(), (Shape{2, 5, 3}));
  EXPECT_EQ(logits.dtype(), DType::f32);
}

TEST(Transformer, SeqLenBeyondMaxIsAnErrorNamingBoth) {
  core::Generator gen(1);
  Transformer model(small_spec(), gen);
  const std::vector<int32_t> tokens(7, 1);
  try {
    model.forward(tokens, 1, 7);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6"), std::string::npos) << e.what();
  }
}

TEST(Transformer, TokenOutOfVocabularyIsAnErrorNamingIt) {
  core::Generator gen(1);
  Transformer model(small_spec(), gen);
  const std::vector<int32_t> tokens{1, 2, 9, 3};
  try {
    model.forward(tokens, 2, 2);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> negative{1, -1};
  EXPECT_THROW(model.forward(negative, 1, 2), std::invalid_argument);
  EXPECT_THROW(model.forward(tokens, 1, 3), std::invalid_argument);  // 4 tokens for [1, 3]
  EXPECT_THROW(model.forward(tokens, 0, 4), std::invalid_argument);
}

TEST(Transformer, CausalLogitsAtTDoNotChangeWhenLaterTokensChange) {
  core::Generator gen(2);
  Transformer model(small_spec(), gen, DType::f64);
  for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5, DType::f64));
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6};
  const Tensor la = model.forward(a, 1, 6).value();
  for (int64_t t = 0; t + 1 < 6; ++t) {
    std::vector<int32_t> b = a;
    for (std::size_t i = static_cast<std::size_t>(t) + 1; i < b.size(); ++i) b[i] = 0;
    const Tensor lb = model.forward(b, 1, 6).value();
    EXPECT_EQ(core::max_abs_diff(la.slice(1, 0, t + 1), lb.slice(1, 0, t + 1)), 0.0) << "t=" << t;
    EXPECT_GT(core::max_abs_diff(la.slice(1, t + 1, 6), lb.slice(1, t + 1, 6)), 1e-9) << "t=" << t;
  }
}

TEST(Transformer, BidirectionalLogitsSeeLaterTokens) {
  core::Generator gen(2);
  Transformer model(small_spec([](ModelSpec& s) { s.causal = false; }), gen, DType::f64);
  for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5, DType::f64));
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 0};
  const Tensor la = model.forward(a, 1, 4).value(), lb = model.forward(b, 1, 4).value();
  EXPECT_GT(core::max_abs_diff(la.slice(1, 0, 1), lb.slice(1, 0, 1)), 1e-9);
}

TEST(Transformer, PaddedPositionsDoNotAffectRealOnes) {
  core::Generator gen(3);
  Transformer model(small_spec([](ModelSpec& s) { s.causal = false; }), gen, DType::f64);
  for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5, DType::f64));
  const Tensor pad = Tensor::from_vector({1, 1, 1, 0, 0}, {1, 5});
  const std::vector<int32_t> a{1, 2, 3, 4, 5}, b{1, 2, 3, 6, 0}, real{1, 2, 3};
  const Tensor la = model.forward(a, 1, 5, &pad).value(), lb = model.forward(b, 1, 5, &pad).value();
  const Tensor alone = model.forward(real, 1, 3).value();
  EXPECT_EQ(core::max_abs_diff(la.slice(1, 0, 3), lb.slice(1, 0, 3)), 0.0);
  EXPECT_LT(core::max_abs_diff(la.slice(1, 0, 3), alone), 1e-12);
}

TEST(Transformer, SameSeedGivesTheSameModelAndDifferentSeedADifferentOne) {
  core::Generator g1(5), g2(5), g3(6);
  Transformer a(small_spec(), g1), b(small_spec(), g2), c(small_spec(), g3);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  double diff_same = 0, diff_other = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    diff_same += core::max_abs_diff(pa[i].value(), pb[i].value());
    diff_other += core::max_abs_diff(pa[i].value(), pc[i].value());
  }
  EXPECT_EQ(diff_same, 0.0);
  EXPECT_GT(diff_other, 0.0);
}

TEST(Transformer, InitializationIsTheDocumentedOne) {
  core::Generator gen(9);
  Transformer model(ModelSpec{.vocab = 64, .max_seq_len = 64, .layers = 1, .heads = 4, .d_model = 64}, gen, DType::f64);
  for (auto& [name, p] : model.named_parameters()) {
    const bool is_ln = name.find("ln") != std::string::npos;
    const bool is_bias = name.ends_with(".bias");
    if (is_ln && !is_bias) {
      EXPECT_EQ(core::max_abs_diff(p.value(), Tensor::ones(p.shape(), DType::f64)), 0.0) << name;
    } else if (is_bias) {
      EXPECT_EQ(core::max_abs_diff(p.value(), Tensor::zeros(p.shape(), DType::f64)), 0.0) << name;
    } else {
      const double std = std::sqrt(core::mean(core::pow(p.value(), 2.0)).item());
      EXPECT_NEAR(std, 0.02, 0.002) << name;
    }
  }
}

TEST(Transformer, TrainAndEvalReachEveryAttentionLayer) {
  core::Generator gen(0);
  Transformer model(small_spec(), gen);
  model.eval();
  for (int64_t i = 0; i < model.num_layers(); ++i) EXPECT_FALSE(model.attention(i).is_training());
  EXPECT_FALSE(model.block(1).mlp()->fc2().is_training());
  model.train();
  for (int64_t i = 0; i < model.num_layers(); ++i) EXPECT_TRUE(model.attention(i).is_training());
}

TEST(Transformer, AttentionAccessorReachesTheNamedLayer) {
  core::Generator gen(0);
  Transformer model(small_spec(), gen);
  EXPECT_EQ(model.num_layers(), 2);
  EXPECT_EQ(model.attention(1).q().weight().node(), model.parameter("blocks.1.attn.q.weight").node());
  EXPECT_EQ(model.attention(0).d_k(), 4);
  EXPECT_THROW(model.attention(2), std::invalid_argument);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6};
  Probe probe(model.num_layers());
  model.forward(tokens, 2, 3, nullptr, &probe);
  EXPECT_EQ(probe.layers[1].attention.shape(), (Shape{2, 2, 3, 3}));
}

TEST(Transformer, ProbeReceivesEveryLayersResidualStreamAndMustMatchTheLayers) {
  core::Generator gen(0);
  Transformer model(small_spec(), gen);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6};
  Probe probe(model.num_layers());
  const Variable logits = model.forward(tokens, 2, 3, nullptr, &probe);
  for (const LayerProbe& layer : probe.layers) {
    EXPECT_EQ(layer.residual.shape(), (Shape{2, 3, model.spec().d_model}));
    EXPECT_EQ(layer.head_outputs.shape(), (Shape{2, 3, model.spec().d_model}));
  }
  // Without a probe, the same logits to the bit.
  EXPECT_EQ(core::max_abs_diff(model.forward(tokens, 2, 3).value(), logits.value()), 0.0);
  Probe wrong(model.num_layers() + 1);
  EXPECT_THROW(model.forward(tokens, 2, 3, nullptr, &wrong), std::invalid_argument);
}

TEST(Transformer, ForwardFromALayerWithTheResidualBeforeItIsTheWholePassBitForBit) {
  core::Generator gen(4);
  Transformer model(small_spec([](ModelSpec& s) { s.layers = 3; }), gen);
  for (auto& p : model.parameters()) p.mutable_value().copy_(gen.normal(p.shape(), 0.0, 0.5));
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6, 0, 6, 5, 4, 3, 2};
  const Tensor pad = Tensor::from_vector({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 6}, DType::f32);
  autograd::NoGradGuard no_grad;
  Probe clean(model.num_layers());
  (void)model.forward(tokens, 2, 6, &pad, &clean);
  for (int64_t layer = 1; layer < model.num_layers(); ++layer) {
    // Layer `layer` changed (a head gated off): the blocks before are the clean pass's.
    const auto changed = [&] {
      Probe probe(model.num_layers());
      probe.layers[static_cast<std::size_t>(layer)].gates = Variable(Tensor::from_vector({1, 0}, {2}, DType::f32));
      return probe;
    };
    Probe whole = changed(), from = changed();
    const Tensor expected = model.forward(tokens, 2, 6, &pad, &whole).value();
    const Tensor got =
        model.forward_from(layer, Variable(clean.layers[static_cast<std::size_t>(layer - 1)].residual), &pad, &from)
            .value();
    EXPECT_EQ(core::max_abs_diff(got, expected), 0.0) << "from layer " << layer;
    EXPECT_GT(core::max_abs_diff(got, model.forward(tokens, 2, 6, &pad).value()), 0.0) << "the gate changed something";
    for (std::size_t l = static_cast<std::size_t>(layer); l < 3; ++l)
      EXPECT_EQ(core::max_abs_diff(from.layers[l].residual, whole.layers[l].residual), 0.0) << "layer " << l;
    EXPECT_FALSE(from.layers[static_cast<std::size_t>(layer - 1)].residual.defined()) << "the blocks before are not run";
  }
  const Variable resid(clean.layers[0].residual);
  EXPECT_THROW(model.forward_from(3, resid), std::invalid_argument);
  EXPECT_THROW(model.forward_from(-1, resid), std::invalid_argument);
  EXPECT_THROW(model.forward_from(1, Variable(Tensor::zeros({2, 6, 4}))), std::invalid_argument);
  EXPECT_THROW(model.forward_from(1, Variable(Tensor::zeros({1, 7, 8}))), std::invalid_argument);
  EXPECT_THROW(model.forward_from(1, Variable(Tensor::zeros({2, 6, 8}, DType::f64))), std::invalid_argument);
  EXPECT_THROW(model.forward_from(1, Variable()), std::invalid_argument);
  Probe wrong(2);
  EXPECT_THROW(model.forward_from(1, resid, nullptr, &wrong), std::invalid_argument);
}

TEST(Transformer, CrossEntropyLossReachesEveryParameter) {
  core::Generator gen(0);
  Transformer model(small_spec(), gen);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> targets{0, 1, 2, -1, 2, 1};
  const Variable logits = model.forward(tokens, 2, 3);
  autograd::cross_entropy(logits, targets).backward();
  for (auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.has_grad()) << name;
    EXPECT_EQ(p.grad().shape(), p.shape()) << name;
  }
}

}  // namespace
}  // namespace headlab::layers

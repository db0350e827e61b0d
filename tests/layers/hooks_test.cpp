// The named hook points (layers/hooks.h) and the ready-made HookSet and
// activation_gradients (layers/hook_set.h).
#include "layers/hooks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/random.h"
#include "layers/hook_set.h"
#include "layers/hooks_finite.h"
#include "layers/transformer.h"
#include "tests/layers/hook_fixtures.h"
#include "tests/precision.h"

namespace headlab::layers {
namespace {

using core::DType;
using fixtures::kBase;
using fixtures::make_model;
using fixtures::pad_mask;
using fixtures::same_bits;
using fixtures::some_tokens;
using fixtures::Variant;
using fixtures::variants;

// Every point wanted, every activation handed back untouched; records the
// names in visiting order.
class Identity final : public Hooks {
 public:
  bool wants(const std::string&) const override { return true; }
  Variable visit(const std::string& name, const Variable& a) override {
    visited.push_back(name);
    return a;
  }
  std::vector<std::string> visited;
};

// Nothing wanted: visit must never be called.
class Nothing final : public Hooks {
 public:
  bool wants(const std::string&) const override { return false; }
  Variable visit(const std::string& name, const Variable&) override { throw std::logic_error("visited " + name); }
};

TEST(Hooks, IdentityAtEveryPointChangesNoBitAndVisitsInForwardOrder) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.what);
    const auto model = make_model(v.spec);
    const std::vector<int32_t> tokens = some_tokens(v.spec, v.batch * v.seq);
    const Tensor mask = pad_mask(v.batch, v.seq);
    const Tensor* m = v.padded ? &mask : nullptr;
    const Tensor plain = model->forward(tokens, v.batch, v.seq, m).value();
    Identity id;
    Probe probe;
    probe.hooks = &id;
    EXPECT_TRUE(same_bits(model->forward(tokens, v.batch, v.seq, m, &probe).value(), plain));
    EXPECT_EQ(id.visited, hook_names(v.spec));
    Nothing nothing;
    probe.hooks = &nothing;
    EXPECT_TRUE(same_bits(model->forward(tokens, v.batch, v.seq, m, &probe).value(), plain));
    // The points computed on the side only when wanted (what the direct
    // logit attribution reads), wanted alone (ln2 then runs apart from the
    // residual add) and kept.
    std::vector<std::string> side;
    for (const std::string& n : hook_names(v.spec))
      if (n.ends_with("hook_result") || n.ends_with("hook_scale")) side.push_back(n);
    EXPECT_EQ(side.size(), static_cast<std::size_t>(v.spec.layers) *
                               (1 + (v.spec.layernorm ? 1 + !v.spec.attn_only : 0)) + v.spec.layernorm);
    HookSet kept(v.spec, side);
    probe.hooks = &kept;
    EXPECT_TRUE(same_bits(model->forward(tokens, v.batch, v.seq, m, &probe).value(), plain));
    EXPECT_EQ(kept.cache().size(), side.size());
  }
}

// A hook at GELU's output runs fc1 and GELU as two nodes; none runs the
// fused linear_gelu, whose backward writes dh over fc2's dx. The gradients
// are the same bits.
class AtMlpPost final : public Hooks {
 public:
  bool wants(const std::string& name) const override { return name.ends_with("mlp.hook_post"); }
  Variable visit(const std::string&, const Variable& a) override { return a; }
};

TEST(Hooks, TheComposedMlpGivesTheFusedOnesGradientBits) {
  const auto model = make_model(kBase);
  const std::vector<int32_t> tokens = some_tokens(kBase, 2 * 70);
  std::vector<int32_t> targets = some_tokens(kBase, 2 * 70, 12);
  auto gradients = [&](Probe* probe) {
    model->zero_grad();
    autograd::cross_entropy(model->forward(tokens, 2, 70, nullptr, probe), targets).backward();
    std::vector<Tensor> g;
    for (auto& [name, p] : model->named_parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const std::vector<Tensor> fused = gradients(nullptr);
  AtMlpPost at_post;
  Probe probe;
  probe.hooks = &at_post;
  const std::vector<Tensor> composed = gradients(&probe);
  ASSERT_EQ(fused.size(), composed.size());
  std::size_t i = 0;
  for (auto& [name, p] : model->named_parameters()) {
    EXPECT_TRUE(same_bits(fused[i], composed[i])) << name;
    ++i;
  }
}

TEST(Hooks, CachedShapesAreTheDocumentedLayouts) {
  const auto model = make_model(kBase);
  const std::vector<int32_t> tokens = some_tokens(kBase, 2 * 5);
  HookSet set(kBase, hook_names(kBase));
  Probe probe;
  probe.hooks = &set;
  model->forward(tokens, 2, 5, nullptr, &probe);
  ASSERT_EQ(set.cache().size(), hook_names(kBase).size());
  for (const auto& [name, t] : set.cache()) EXPECT_EQ(t.shape(), hook_shape(kBase, name, 2, 5)) << name;
  EXPECT_EQ(hook_shape(kBase, "blocks.1.attn.hook_q", 2, 5), (Shape{2, 5, 2, 4}));
  EXPECT_EQ(hook_shape(kBase, "blocks.1.attn.hook_pattern", 2, 5), (Shape{2, 2, 5, 5}));
  EXPECT_EQ(hook_shape(kBase, "blocks.0.mlp.hook_post", 2, 5), (Shape{2, 5, 16}));
  EXPECT_EQ(hook_shape(kBase, "blocks.1.attn.hook_result", 2, 5), (Shape{2, 5, 2, 8}));
  EXPECT_EQ(hook_shape(kBase, "ln_final.hook_scale", 2, 5), (Shape{2, 5, 1}));
  // The masked scores are -inf above the diagonal, and the pattern's rows sum to 1.
  const Tensor s = set.cache().at("blocks.0.attn.hook_attn_scores");
  EXPECT_TRUE(std::isinf(s.at({0, 1, 0, 1})));
  EXPECT_FALSE(std::isinf(s.at({0, 1, 1, 0})));
}

// An unknown name is refused naming the nearest valid ones, where the list
// is, and (a block past the model's last) how many layers the model has.
TEST(Hooks, AnUnknownNameIsRefusedSayingWhatTheModelHas) {
  const auto message = [](const std::string& name) {
    try {
      check_hook_name(kBase, name);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string beyond = message("blocks.2.attn.hook_z");  // kBase has 2 layers
  EXPECT_NE(beyond.find("this model has 2 layers, blocks.0 to blocks.1"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("blocks.1.attn.hook_z"), std::string::npos) << beyond;
  const std::string misspelled = message("hook_patern");
  EXPECT_NE(misspelled.find("blocks.0.attn.hook_pattern"), std::string::npos) << misspelled;
  EXPECT_EQ(misspelled.find("layers,"), std::string::npos) << misspelled;
  EXPECT_NE(misspelled.find("docs/architecture.md"), std::string::npos) << misspelled;
  EXPECT_EQ(message("blocks.1.attn.hook_z"), "accepted");
}

TEST(Hooks, CachedPatternEqualsTheProbesAttention) {
  const auto model = make_model(kBase);
  const std::vector<int32_t> tokens = some_tokens(kBase, 2 * 9);
  Probe plain(kBase.layers);
  model->forward(tokens, 2, 9, nullptr, &plain);
  HookSet set(kBase, {"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"});
  Probe probe;
  probe.hooks = &set;
  model->forward(tokens, 2, 9, nullptr, &probe);
  for (int64_t l = 0; l < kBase.layers; ++l)
    EXPECT_TRUE(same_bits(set.cache().at("blocks." + std::to_string(l) + ".attn.hook_pattern"),
                          plain.layers[static_cast<std::size_t>(l)].attention));
}

TEST(Hooks, ZeroingOneHeadsZEqualsItsProbeGateAtZero) {
  const auto model = make_model(kBase);
  const int64_t B = 2, T = 9;
  const std::vector<int32_t> tokens = some_tokens(kBase, B * T);
  for (int64_t head = 0; head < kBase.heads; ++head) {
    const std::string name = "blocks.1.attn.hook_z";
    HookSet record(kBase, {name});
    Probe rp;
    rp.hooks = &record;
    model->forward(tokens, B, T, nullptr, &rp);
    Tensor z = record.cache().at(name).clone();
    z.slice(2, head, head + 1).fill_(0.0);
    HookSet patch(kBase, {}, {{name, z}});
    Probe pp;
    pp.hooks = &patch;
    const Tensor patched = model->forward(tokens, B, T, nullptr, &pp).value();
    Probe gated(kBase.layers);
    std::vector<double> g(static_cast<std::size_t>(kBase.heads), 1.0);
    g[static_cast<std::size_t>(head)] = 0.0;
    gated.layers[1].gates = Variable(Tensor::from_vector(g, {kBase.heads}, DType::f32));
    const Tensor ablated = model->forward(tokens, B, T, nullptr, &gated).value();
    // Equal values: 0 * x may be -0 where the patch writes +0, which no later
    // sum can tell apart, so the logits are bitwise equal.
    EXPECT_TRUE(same_bits(patched, ablated)) << "head " << head;
  }
}

TEST(Hooks, ReplacingTheResidualAtOnePositionChangesOnlyLaterOutputs) {
  const auto model = make_model(kBase);
  const int64_t B = 2, T = 9, at = 4;
  const std::vector<int32_t> tokens = some_tokens(kBase, B * T);
  const std::string name = "blocks.1.hook_resid_pre";
  HookSet record(kBase, {name});
  Probe rp;
  rp.hooks = &record;
  const Tensor clean = model->forward(tokens, B, T, nullptr, &rp).value();
  Tensor r = record.cache().at(name).clone();
  Tensor row = r.select(0, 0).select(0, at);
  row.copy_(core::Generator(5).normal(row.shape(), 0.0, 1.0, DType::f32));
  HookSet patch(kBase, {}, {{name, r}});
  Probe pp;
  pp.hooks = &patch;
  const Tensor patched = model->forward(tokens, B, T, nullptr, &pp).value();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const bool changed = !same_bits(clean.select(0, b).select(0, t), patched.select(0, b).select(0, t));
      EXPECT_EQ(changed, b == 0 && t >= at) << "b " << b << " t " << t;
    }
}

// Sum over the heads of hook_result + o's bias is hook_attn_out, and
// hook_scale is the std (eps 1e-5) of what its LayerNorm reads.
TEST(Hooks, ResultSumsToAttnOutAndScaleIsTheStd) {
  const auto model = make_model(kBase);
  const int64_t B = 2, T = 9;
  const std::vector<int32_t> tokens = some_tokens(kBase, B * T);
  const std::vector<std::string> names{"blocks.1.attn.hook_result", "blocks.1.hook_attn_out",
                                       "blocks.1.hook_resid_pre",   "blocks.1.ln1.hook_scale",
                                       "blocks.0.hook_resid_mid",   "blocks.0.ln2.hook_scale",
                                       "blocks.1.hook_resid_post",  "ln_final.hook_scale"};
  HookSet set(kBase, names);
  Probe probe;
  probe.hooks = &set;
  model->forward(tokens, B, T, nullptr, &probe);
  const auto& c = set.cache();
  const Tensor bias = model->attention(1).o().bias().value();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < kBase.d_model; ++j) {
        double sum = bias.at({j});
        for (int64_t i = 0; i < kBase.heads; ++i) sum += c.at("blocks.1.attn.hook_result").at({b, t, i, j});
        EXPECT_NEAR(sum, c.at("blocks.1.hook_attn_out").at({b, t, j}), 1e-5);
      }
  for (const auto& [scale, input] : std::vector<std::pair<std::string, std::string>>{
           {"blocks.1.ln1.hook_scale", "blocks.1.hook_resid_pre"},
           {"blocks.0.ln2.hook_scale", "blocks.0.hook_resid_mid"},
           {"ln_final.hook_scale", "blocks.1.hook_resid_post"}})
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const auto d = static_cast<double>(kBase.d_model);
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < kBase.d_model; ++j) mean += c.at(input).at({b, t, j}) / d;
        for (int64_t j = 0; j < kBase.d_model; ++j) var += std::pow(c.at(input).at({b, t, j}) - mean, 2) / d;
        EXPECT_NEAR(c.at(scale).at({b, t, 0}), std::sqrt(var + 1e-5), 1e-5) << scale;
      }
}

// A replaced hook_result makes attn_out its sum over the heads + o's bias; a
// replaced ln_final.hook_scale divides the centered residual in the logits.
TEST(Hooks, ReplacedResultAndScaleGiveWhatTheEquationsSay) {
  const auto model = make_model(kBase);
  const int64_t B = 2, T = 5, d = kBase.d_model;
  const std::vector<int32_t> tokens = some_tokens(kBase, B * T);
  const Tensor result = core::Generator(21).normal({B, T, kBase.heads, d}, 0.0, 1.0, DType::f32);
  const Tensor scale = core::Generator(22).normal({B, T, 1}, 2.0, 0.5, DType::f32);
  HookSet set(kBase, {"blocks.0.hook_attn_out", "blocks.1.hook_resid_post"},
              {{"blocks.0.attn.hook_result", result}, {"ln_final.hook_scale", scale}});
  Probe probe;
  probe.hooks = &set;
  const Tensor logits = model->forward(tokens, B, T, nullptr, &probe).value();
  const Tensor o_bias = model->attention(0).o().bias().value();
  const Tensor w = model->final_norm()->weight().value(), lb = model->final_norm()->bias().value();
  const Tensor head_w = model->unembed().weight().value(), head_b = model->unembed().bias().value();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < d; ++j) {
        double sum = o_bias.at({j});
        for (int64_t i = 0; i < kBase.heads; ++i) sum += result.at({b, t, i, j});
        EXPECT_NEAR(set.cache().at("blocks.0.hook_attn_out").at({b, t, j}), sum, 1e-5);
      }
      const Tensor x = set.cache().at("blocks.1.hook_resid_post").select(0, b).select(0, t);
      double mean = 0.0;
      for (int64_t j = 0; j < d; ++j) mean += x.at({j}) / static_cast<double>(d);
      for (int64_t c = 0; c < kBase.vocab; ++c) {
        double logit = head_b.at({c}), abs_products = 0.0;
        for (int64_t j = 0; j < d; ++j) {
          const double term = ((x.at({j}) - mean) / scale.at({b, t, 0}) * w.at({j}) + lb.at({j})) * head_w.at({c, j});
          logit += term;
          abs_products += std::abs(term);
        }
        EXPECT_NEAR(logits.at({b, t, c}), logit, 1e-5 + test::bf16_rounding_bound(abs_products));
      }
    }
}

TEST(Hooks, UnknownNamesNameTheNearestValidOnes) {
  const auto expect_message = [](const std::string& bad, const std::string& part) {
    try {
      HookSet set(kBase, {bad});
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  };
  expect_message("blocks.0.attn.hook_patern", "blocks.0.attn.hook_pattern");
  expect_message("hook_pattern", "blocks.1.attn.hook_pattern");
  expect_message("hook_patern", "blocks.0.attn.hook_pattern");
  expect_message("blocks.0.hook_resid_mid_", "blocks.0.hook_resid_mid");
  ModelSpec attn_only = kBase;
  attn_only.attn_only = true;
  EXPECT_THROW(HookSet(attn_only, {"blocks.0.mlp.hook_pre"}), std::invalid_argument);
  EXPECT_THROW(HookSet(kBase, {}, {{"blocks.2.hook_resid_pre", Tensor()}}), std::invalid_argument);
}

TEST(Hooks, AReplacementOfTheWrongShapeNamesTheExpectedOne) {
  const auto model = make_model(kBase);
  const std::vector<int32_t> tokens = some_tokens(kBase, 2 * 5);
  HookSet patch(kBase, {}, {{"blocks.0.attn.hook_pattern", Tensor::zeros({2, 2, 5, 4})}});
  Probe probe;
  probe.hooks = &patch;
  try {
    model->forward(tokens, 2, 5, nullptr, &probe);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(core::to_string(Shape{2, 2, 5, 5})), std::string::npos) << e.what();
  }
}

// Two hooks returning the wrong thing (a Hooks of the caller's own).
class WrongShape final : public Hooks {
 public:
  bool wants(const std::string& n) const override { return n == "blocks.0.attn.hook_q"; }
  Variable visit(const std::string&, const Variable&) override { return Variable(Tensor::zeros({3})); }
};

TEST(Hooks, AHookReturningTheWrongShapeIsRefused) {
  const auto model = make_model(kBase);
  const std::vector<int32_t> tokens = some_tokens(kBase, 2 * 5);
  WrongShape wrong;
  Probe probe;
  probe.hooks = &wrong;
  try {
    model->forward(tokens, 2, 5, nullptr, &probe);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(core::to_string(Shape{2, 5, 2, 4})), std::string::npos) << e.what();
  }
}

// The message of what `hooks` make a forward pass of the base model throw ("" if it runs).
std::string refusal(const Transformer& model, Hooks& hooks, int64_t batch = 2, int64_t seq = 5) {
  Probe probe;
  probe.hooks = &hooks;
  try {
    model.forward(some_tokens(kBase, batch * seq), batch, seq, nullptr, &probe);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// QA20 F13.8: a hook that hands back NaN or infinity poisons every later
// activation, the logits and the loss: refused, naming the point, the count
// and where the first one is. -inf at hook_attn_scores hides a key (as the
// causal mask does) and is taken, unless it hides a query's every key.
TEST(Hooks, AHookReturningNanOrInfinityIsRefusedNamingThePoint) {
  const auto model = make_model(kBase);
  Tensor nan = Tensor::zeros({2, 5, 8});
  nan.set({1, 2, 3}, std::nan(""));
  nan.set({1, 4, 0}, std::nan(""));
  HookSet nan_mid(kBase, {}, {{"blocks.0.hook_resid_mid", nan}});
  const std::string said = refusal(*model, nan_mid);
  for (const char* part : {"hook 'blocks.0.hook_resid_mid' returned 2 NaN or infinite values of 80",
                           "the first at [1, 2, 3]", "return finite values"})
    EXPECT_NE(said.find(part), std::string::npos) << said;
  HookSet cache(kBase, {"blocks.1.attn.hook_attn_scores"});
  refusal(*model, cache);
  const Tensor scores = cache.cache().at("blocks.1.attn.hook_attn_scores");
  const double inf = std::numeric_limits<double>::infinity();
  for (const double bad : {std::nan(""), inf}) {
    Tensor s = scores.clone();
    s.set({0, 1, 3, 1}, bad);
    HookSet patch(kBase, {}, {{"blocks.1.attn.hook_attn_scores", s}});
    EXPECT_NE(refusal(*model, patch).find("blocks.1.attn.hook_attn_scores' returned 1 NaN or +inf value"),
              std::string::npos)
        << refusal(*model, patch);
  }
  // -inf hides key 1 from query 3 of head 1: taken, and the pattern puts nothing there.
  Tensor hidden = scores.clone();
  hidden.set({0, 1, 3, 1}, -inf);
  HookSet hide(kBase, {"blocks.1.attn.hook_pattern"}, {{"blocks.1.attn.hook_attn_scores", hidden}});
  EXPECT_EQ(refusal(*model, hide), "");
  EXPECT_EQ(hide.cache().at("blocks.1.attn.hook_pattern").at({0, 1, 3, 1}), 0.0);
  EXPECT_NEAR(hide.cache().at("blocks.1.attn.hook_pattern").at({0, 1, 3, 0}) +
                  hide.cache().at("blocks.1.attn.hook_pattern").at({0, 1, 3, 2}) +
                  hide.cache().at("blocks.1.attn.hook_pattern").at({0, 1, 3, 3}),
              1.0, 1e-6);
  // Every key of query 2 hidden: its softmax would be 0/0.
  Tensor row = scores.clone();
  for (int64_t k = 0; k < 5; ++k) row.set({1, 0, 2, k}, -inf);
  HookSet empty(kBase, {}, {{"blocks.1.attn.hook_attn_scores", row}});
  EXPECT_NE(refusal(*model, empty).find("hide every key of query [1, 0, 2]"), std::string::npos)
      << refusal(*model, empty);
  // The entries after a query, which a causal pass ignores, may hold anything (scores * 0 turns their -inf to
  // NaN); a bidirectional pass reads them.
  Tensor after = scores.clone();
  after.set({0, 1, 1, 3}, std::nan(""));
  HookSet ignored(kBase, {"blocks.1.hook_resid_post"}, {{"blocks.1.attn.hook_attn_scores", after}});
  EXPECT_EQ(refusal(*model, ignored), "");
  EXPECT_TRUE(std::isfinite(ignored.cache().at("blocks.1.hook_resid_post").at({0, 1, 0})));
  ModelSpec bidirectional = kBase;
  bidirectional.causal = false;
  const auto both_ways = make_model(bidirectional);
  HookSet bidirectional_cache(bidirectional, {"blocks.1.attn.hook_pattern"});
  refusal(*both_ways, bidirectional_cache);
  Tensor read = bidirectional_cache.cache().at("blocks.1.attn.hook_pattern").clone();
  read.set({0, 1, 1, 3}, std::nan(""));
  HookSet read_after(bidirectional, {}, {{"blocks.1.attn.hook_pattern", read}});
  EXPECT_NE(refusal(*both_ways, read_after).find("returned 1 NaN or infinite value of 100 (the first at [0, 1, 1, 3])"),
            std::string::npos)
      << refusal(*both_ways, read_after);
  // A model that is NaN already (a diverged run) is no hook's doing: x + delta hands on what it was given.
  const auto diverged = make_model(kBase);
  for (auto& [name, p] : diverged->named_parameters())
    if (name == "tok_emb.weight") p.mutable_value().set({some_tokens(kBase, 1)[0], 0}, std::nan(""));
  HookSet delta(kBase, {"blocks.0.hook_resid_mid"}, {}, {{"blocks.0.hook_resid_mid", Variable(Tensor::zeros({2, 5, 8}))}});
  EXPECT_EQ(refusal(*diverged, delta), "");
  EXPECT_TRUE(std::isnan(delta.cache().at("blocks.0.hook_resid_mid").at({0, 0, 0})));
}

// A Hooks of the caller's own that writes `writes` into the activation at
// `point` and hands the same Variable back: an edit in place.
class EditInPlace final : public Hooks {
 public:
  EditInPlace(std::string point, std::vector<std::pair<Shape, double>> writes, bool says_it_edits = true)
      : point_(std::move(point)), writes_(std::move(writes)), says_it_edits_(says_it_edits) {}
  bool wants(const std::string& n) const override { return n == point_; }
  bool may_edit_in_place(const std::string&) const override { return says_it_edits_; }
  Variable visit(const std::string&, const Variable& a) override {
    Tensor values = a.value();  // shares the activation's storage
    for (const auto& [at, value] : writes_) values.set(at, value);
    return a;
  }

 private:
  std::string point_;
  std::vector<std::pair<Shape, double>> writes_;
  bool says_it_edits_;
};

// The logits of the base model's pass under `hooks` (nullptr: none).
Tensor logits_with(const Transformer& model, Hooks* hooks) {
  Probe probe;
  probe.hooks = hooks;
  return model.forward(some_tokens(kBase, 10), 2, 5, nullptr, hooks ? &probe : nullptr).value();
}

// An edit in place that brings NaN or infinity is refused as a replacement
// holding them is, with the same words (the point, the count, the first);
// -inf at hook_attn_scores hides a key, unless it hides all of a query's,
// and the entries after a causal query may hold anything.
TEST(Hooks, AnEditInPlaceBringingNanOrInfinityIsRefusedAsAReplacementIs) {
  const auto model = make_model(kBase);
  const double inf = std::numeric_limits<double>::infinity();
  EditInPlace nan_mid("blocks.0.hook_resid_mid", {{{1, 2, 3}, std::nan("")}, {{1, 4, 0}, -inf}});
  const std::string said = refusal(*model, nan_mid);
  for (const char* part : {"hook 'blocks.0.hook_resid_mid' returned 2 NaN or infinite values of 80",
                           "the first at [1, 2, 3]", "return finite values"})
    EXPECT_NE(said.find(part), std::string::npos) << said;
  EditInPlace plus_inf("blocks.1.attn.hook_attn_scores", {{{0, 1, 3, 1}, inf}});
  EXPECT_NE(refusal(*model, plus_inf).find("blocks.1.attn.hook_attn_scores' returned 1 NaN or +inf value of 100 "
                                           "(the first at [0, 1, 3, 1])"),
            std::string::npos)
      << refusal(*model, plus_inf);
  EditInPlace hide("blocks.1.attn.hook_attn_scores", {{{0, 1, 3, 1}, -inf}, {{0, 1, 1, 3}, std::nan("")}});
  EXPECT_EQ(refusal(*model, hide), "");
  std::vector<std::pair<Shape, double>> every_key;
  for (int64_t k = 0; k <= 2; ++k) every_key.push_back({{1, 0, 2, k}, -inf});  // keys 0..2: all query 2 sees
  EditInPlace empty("blocks.1.attn.hook_attn_scores", every_key);
  EXPECT_NE(refusal(*model, empty).find("hide every key of query [1, 0, 2]"), std::string::npos)
      << refusal(*model, empty);
  // A finite edit is taken, and reaches the pass.
  EditInPlace finite("blocks.0.hook_resid_mid", {{{0, 1, 2}, 5.0}});
  EXPECT_EQ(refusal(*model, finite), "");
  EXPECT_FALSE(same_bits(logits_with(*model, &finite), logits_with(*model, nullptr)));
}

// What the activation held already is no hook's doing: a diverged model's
// NaN flows on through a hook that edits another entry in place.
TEST(Hooks, AnEditInPlaceOfADivergedModelsActivationIsNotBlamedForItsNan) {
  const auto diverged = make_model(kBase);
  for (auto& [name, p] : diverged->named_parameters())
    if (name == "tok_emb.weight") p.mutable_value().set({some_tokens(kBase, 1)[0], 0}, std::nan(""));
  EditInPlace finite("blocks.0.hook_resid_mid", {{{1, 4, 7}, 1.0}});
  EXPECT_EQ(refusal(*diverged, finite), "");
  EXPECT_TRUE(std::isnan(logits_with(*diverged, &finite).at({0, 0, 0})));
}

// Where the pass does not read an edit in place (a copy point's copy,
// hook_result and hook_scale, computed on the side), it is not checked
// either: the pass goes on as without the hook. A Hooks that says it never
// edits in place is not read for it.
TEST(Hooks, AnEditInPlaceThePassDoesNotReadIsNotChecked) {
  const auto model = make_model(kBase);
  const Tensor plain = logits_with(*model, nullptr);
  for (const auto& [point, at] : std::vector<std::pair<std::string, Shape>>{
           {"blocks.0.hook_mlp_in", {0, 1, 2}},
           {"blocks.0.hook_attn_in", {0, 1, 1, 2}},
           {"blocks.1.attn.hook_result", {0, 1, 1, 2}},
           {"blocks.0.ln1.hook_scale", {0, 1, 0}}}) {
    EditInPlace nan(point, {{at, std::nan("")}});
    EXPECT_EQ(refusal(*model, nan), "") << point;
    EXPECT_TRUE(same_bits(logits_with(*model, &nan), plain)) << point;
  }
  EditInPlace unchecked("blocks.0.hook_resid_mid", {{{0, 1, 2}, std::nan("")}}, /*says_it_edits=*/false);
  EXPECT_EQ(refusal(*model, unchecked), "");
  EXPECT_TRUE(std::isnan(logits_with(*model, &unchecked).at({0, 1, 0})));
}

// Cross-entropy of the f64 model with `name` replaced by `value`.
double loss_with(const Transformer& m, const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets,
                 const std::string& name, const Tensor& value) {
  HookSet patch(m.spec(), {}, {{name, value}});
  Probe probe;
  probe.hooks = &patch;
  return autograd::cross_entropy(m.forward(tokens, 2, 5, nullptr, &probe), targets).value().item();
}

TEST(Hooks, ActivationGradientsMatchFiniteDifferencesAndLeaveTheParametersAlone) {
  const auto model = make_model(kBase, DType::f64);
  const std::vector<int32_t> tokens = some_tokens(kBase, 10);
  const std::vector<int32_t> targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  const std::vector<std::string> names{"hook_embed", "blocks.0.hook_resid_pre", "blocks.1.attn.hook_pattern",
                                       "blocks.0.attn.hook_attn_scores", "blocks.1.mlp.hook_pre"};
  std::vector<bool> flags;
  for (auto& [n, p] : model->named_parameters()) flags.push_back(p.requires_grad());
  double loss = 0.0;
  const auto grads = activation_gradients(*model, tokens, 2, 5, targets, names, nullptr, nullptr, &loss);
  std::size_t i = 0;
  for (auto& [n, p] : model->named_parameters()) {
    EXPECT_FALSE(p.has_grad()) << n;
    EXPECT_EQ(p.requires_grad(), flags[i++]) << n;
  }
  // The embedding flows into the first residual unchanged: the same gradient.
  EXPECT_TRUE(same_bits(grads.at("hook_embed"), grads.at("blocks.0.hook_resid_pre")));
  HookSet record(kBase, names);
  Probe rp;
  rp.hooks = &record;
  EXPECT_NEAR(autograd::cross_entropy(model->forward(tokens, 2, 5, nullptr, &rp), targets).value().item(), loss, 1e-12);
  const double eps = 1e-6;
  for (const char* name : {"blocks.1.attn.hook_pattern", "blocks.1.mlp.hook_pre", "blocks.0.hook_resid_pre"})
    for (const std::vector<int64_t>& at :
         std::vector<std::vector<int64_t>>{{0, 1, 3, 2}, {1, 0, 4, 0}, {0, 4, 1}, {1, 2, 5}}) {
      const Tensor clean = record.cache().at(name);
      if (static_cast<int64_t>(at.size()) != clean.dim()) continue;
      Tensor up = clean.clone(), down = clean.clone();
      up.set(at, clean.at(at) + eps);
      down.set(at, clean.at(at) - eps);
      const double fd = (loss_with(*model, tokens, targets, name, up) - loss_with(*model, tokens, targets, name, down)) /
                        (2 * eps);
      EXPECT_NEAR(grads.at(name).at(at), fd, 1e-7) << name;
    }
}

// A metric given by its gradient at the logits: seeded with dLoss/dlogits of
// the mean cross-entropy ((softmax - one-hot) / n at the positions with a
// target), the gradients are the loss's own, and a seed of another shape is
// refused before any backward.
TEST(Hooks, ActivationGradientsOfASeedAtTheLogitsAreTheLossGradientsForTheLossSeed) {
  const auto model = make_model(kBase, DType::f64);
  const std::vector<int32_t> tokens = some_tokens(kBase, 10);
  const std::vector<int32_t> targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  const std::vector<std::string> names{"hook_embed", "blocks.1.attn.hook_z", "blocks.0.mlp.hook_post"};
  const auto want = activation_gradients(*model, tokens, 2, 5, targets, names);
  int calls = 0;
  const auto seed = [&](const Tensor& logits) {
    ++calls;
    const int64_t classes = logits.shape()[2];
    Tensor g = Tensor::zeros(logits.shape(), logits.dtype());
    for (int64_t p = 0; p < 10; ++p) {
      if (targets[p] < 0) continue;
      const double* row = logits.contiguous().data<double>() + p * classes;
      double top = row[0], total = 0.0;
      for (int64_t c = 1; c < classes; ++c) top = std::max(top, row[c]);
      for (int64_t c = 0; c < classes; ++c) total += std::exp(row[c] - top);
      for (int64_t c = 0; c < classes; ++c)
        g.data<double>()[p * classes + c] = (std::exp(row[c] - top) / total - (c == targets[p] ? 1.0 : 0.0)) / 8.0;
    }
    return g;
  };
  const auto got = activation_gradients(*model, tokens, 2, 5, LogitsGradient(seed), names);
  EXPECT_EQ(calls, 1);
  for (const std::string& n : names) {
    const Tensor a = got.at(n), b = want.at(n);
    ASSERT_EQ(a.shape(), b.shape()) << n;
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      worst = std::max(worst, std::abs(a.data<double>()[i] - b.data<double>()[i]));
      scale = std::max(scale, std::abs(b.data<double>()[i]));
    }
    EXPECT_GT(scale, 0.0) << n;
    EXPECT_LT(worst, 1e-12) << n;
  }
  for (auto& [n, p] : model->named_parameters()) EXPECT_FALSE(p.has_grad()) << n;
  const auto wrong = [](const Tensor& logits) { return Tensor::zeros({2, 5}, logits.dtype()); };
  try {
    activation_gradients(*model, tokens, 2, 5, LogitsGradient(wrong), names);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected the logits'"), std::string::npos) << e.what();
  }
}

// Under a NoGradGuard no graph is recorded: an error, never gradients of zero.
TEST(Hooks, ActivationGradientsWithGradientsDisabledThrowInsteadOfReturningZeros) {
  const auto model = make_model(kBase, DType::f64);
  const std::vector<int32_t> tokens = some_tokens(kBase, 10);
  const std::vector<int32_t> targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  autograd::NoGradGuard no_grad;
  try {
    activation_gradients(*model, tokens, 2, 5, targets, {"hook_embed"});
    ADD_FAILURE() << "no exception";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("NoGradGuard"), std::string::npos) << e.what();
  }
  autograd::GradModeGuard enabled(true);
  const Tensor g = activation_gradients(*model, tokens, 2, 5, targets, {"hook_embed"}).at("hook_embed");
  double total = 0.0;
  for (int64_t i = 0; i < g.numel(); ++i) total += std::abs(g.data<double>()[i]);
  EXPECT_GT(total, 0.0);
}


// patch: the replacement's values, the gradient to x only at the entries it kept.
TEST(Hooks, APatchPassesTheGradientOnlyWhereItKeptTheValue) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x0 = Tensor::zeros({4}, DType::f64);
  for (int64_t i = 0; i < 4; ++i) x0.set({i}, static_cast<double>(i) + 1.0);
  x0.set({3}, -inf);  // a hidden key, kept
  const Variable x(x0, true);
  Tensor r = x0.clone();
  r.set({1}, 7.0);
  const Variable y = patch(x, r);
  EXPECT_TRUE(same_bits(y.value(), r));
  autograd::sum(autograd::mul(autograd::slice(y, 0, 0, 3), 2.0)).backward();
  const std::vector<double> want{2, 0, 2, 0};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(x.grad().at({i}), want[static_cast<std::size_t>(i)]) << i;
}

// Zeroes head 1 of blocks.1.attn.hook_z through patch, as a Python hook's replacement is taken.
class AblateHead final : public Hooks {
 public:
  bool wants(const std::string& name) const override { return name == "blocks.1.attn.hook_z"; }
  bool may_edit_in_place(const std::string&) const override { return false; }
  Variable visit(const std::string&, const Variable& z) override {
    Tensor r = z.value().contiguous().clone();
    for (int64_t b = 0; b < r.size(0); ++b)
      for (int64_t t = 0; t < r.size(1); ++t)
        for (int64_t k = 0; k < r.size(3); ++k) r.set({b, t, 1, k}, 0.0);
    return patch(z, r);
  }
};

// The caller's hooks make the gradients the hooked pass's: ablating head 1 at
// hook_z gives those of the model whose W_O block of head 1 is zero.
TEST(Hooks, ActivationGradientsThroughCallerHooksAreTheHookedPasss) {
  const auto model = make_model(kBase, DType::f64), edited = make_model(kBase, DType::f64);
  for (auto& [n, p] : edited->named_parameters())
    if (n == "blocks.1.attn.o.weight") {
      const int64_t d_k = kBase.d_model / kBase.heads;
      Tensor w = p.value();  // shares the parameter's memory
      for (int64_t row = 0; row < w.size(0); ++row)
        for (int64_t c = d_k; c < 2 * d_k; ++c) w.set({row, c}, 0.0);
    }
  const std::vector<int32_t> tokens = some_tokens(kBase, 10);
  const std::vector<int32_t> targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  const std::vector<std::string> names{"hook_embed", "blocks.1.hook_resid_pre", "blocks.1.attn.hook_v"};
  AblateHead ablate;
  const auto got = activation_gradients(*model, tokens, 2, 5, targets, names, nullptr, nullptr, nullptr, &ablate);
  const auto want = activation_gradients(*edited, tokens, 2, 5, targets, names);
  const auto plain = activation_gradients(*model, tokens, 2, 5, targets, names);
  for (const std::string& n : names) {
    const Tensor a = got.at(n).contiguous(), b = want.at(n).contiguous();
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<double>()[i], b.data<double>()[i], 1e-12) << n;
  }
  EXPECT_FALSE(same_bits(got.at("hook_embed"), plain.at("hook_embed")));  // the hook was taken
  // Hooks that may edit in place are refused: nothing would check the edit.
  Identity in_place;
  EXPECT_THROW(activation_gradients(*model, tokens, 2, 5, targets, names, nullptr, nullptr, nullptr, &in_place),
               std::invalid_argument);
}


// The check skips the padded keys the pass hides again: scores * 0 (NaN where
// a padded key held -inf) passes, NaN at a real key does not.
TEST(Hooks, TheFiniteCheckSkipsPaddedKeysButNotRealOnes) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor mask = pad_mask(2, 4);  // row 0's last two tokens padded
  Tensor given = Tensor::zeros({2, 1, 4, 4}, DType::f64);
  for (int64_t q = 0; q < 4; ++q)
    for (int64_t k = 2; k < 4; ++k) given.set({0, 0, q, k}, -inf);
  Tensor zeroed = Tensor::zeros({2, 1, 4, 4}, DType::f64);
  for (int64_t q = 0; q < 4; ++q)
    for (int64_t k = 2; k < 4; ++k) zeroed.set({0, 0, q, k}, nan);  // -inf * 0
  const std::string name = "blocks.0.attn.hook_attn_scores";
  EXPECT_NO_THROW(refuse_non_finite(name, given, zeroed, &mask));
  EXPECT_THROW(refuse_non_finite(name, given, zeroed), std::invalid_argument);
  Tensor real_nan = zeroed.clone();
  real_nan.set({0, 0, 3, 1}, nan);
  EXPECT_THROW(refuse_non_finite(name, given, real_nan, &mask), std::invalid_argument);
  real_nan = zeroed.clone();
  real_nan.set({1, 0, 0, 3}, nan);  // row 1 has no padding
  EXPECT_THROW(refuse_non_finite(name, given, real_nan, &mask), std::invalid_argument);
  // An edit in place is not hidden again: NaN at its padded keys is still refused.
  const FiniteBefore before(name, given);
  EXPECT_THROW(before.refuse_edit(zeroed), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::layers

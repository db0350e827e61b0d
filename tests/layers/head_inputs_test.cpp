// TransformerLens's copy points (layers/hooks.h): hook_attn_in and
// hook_q_input, hook_k_input, hook_v_input (each head's own input,
// layers/head_inputs.h) and hook_mlp_in (what ln2 and the MLP read).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/random.h"
#include "layers/hook_set.h"
#include "layers/hooks.h"
#include "layers/transformer.h"
#include "tests/layers/hook_fixtures.h"
#include "tests/precision.h"

namespace headlab::layers {
namespace {

using core::DType;
using fixtures::kBase;
using fixtures::make_model;
using fixtures::same_bits;
using fixtures::some_tokens;

const std::vector<std::string> kCopyPoints{"hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input",
                                           "hook_mlp_in"};

// The copy points of every block of `spec` (no hook_mlp_in without an MLP).
std::vector<std::string> copy_points(const ModelSpec& spec) {
  std::vector<std::string> names;
  for (const std::string& n : hook_names(spec))
    for (const std::string& p : kCopyPoints)
      if (n.ends_with("." + p)) names.push_back(n);
  return names;
}

// The logits of `model` with `hooks` (null: none).
Tensor logits_with(const Transformer& model, const std::vector<int32_t>& tokens, int64_t batch, int64_t seq,
                   const Tensor* mask, Hooks* hooks) {
  Probe probe;
  probe.hooks = hooks;
  return model.forward(tokens, batch, seq, mask, &probe).value();
}

// Row (b, t) of a [B, T, d] tensor, or of head i's [B, T, h, d] slice.
std::vector<double> row(const Tensor& x, int64_t b, int64_t t, int64_t head = -1) {
  const Tensor r = head < 0 ? x.select(0, b).select(0, t) : x.select(0, b).select(0, t).select(0, head);
  return r.to_vector();
}

std::vector<double> layer_norm(const std::vector<double>& x, const Tensor& w, const Tensor& bias) {
  const auto d = static_cast<double>(x.size());
  double mean = 0.0, var = 0.0;
  for (double v : x) mean += v / d;
  for (double v : x) var += (v - mean) * (v - mean) / d;
  std::vector<double> y(x.size());
  for (std::size_t j = 0; j < x.size(); ++j)
    y[j] = (x[j] - mean) / std::sqrt(var + 1e-5) * w.at({static_cast<int64_t>(j)}) + bias.at({static_cast<int64_t>(j)});
  return y;
}

// Rows `first` .. first + n - 1 of x W^T + b for W [out, in]; `abs_products`
// receives each output's sum of |x_k W_jk| (for the bf16 bound).
std::vector<double> linear_rows(const std::vector<double>& x, const Linear& l, int64_t first, int64_t n,
                                std::vector<double>* abs_products = nullptr) {
  const Tensor w = l.weight().value(), b = l.bias().value();
  std::vector<double> y(static_cast<std::size_t>(n));
  if (abs_products) abs_products->assign(static_cast<std::size_t>(n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    double sum = b.at({first + j});
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double term = x[k] * w.at({first + j, static_cast<int64_t>(k)});
      sum += term;
      if (abs_products) (*abs_products)[static_cast<std::size_t>(j)] += std::abs(term);
    }
    y[static_cast<std::size_t>(j)] = sum;
  }
  return y;
}

TEST(HeadInputs, TheCopyPointsComeInTransformerLensOrderAndLayouts) {
  const std::vector<std::string> names = hook_names(kBase);
  // Each run of points, consecutive in forward order as in TransformerLens's block.
  for (const std::vector<std::string>& run : std::vector<std::vector<std::string>>{
           {"hook_resid_pre", "hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "ln1.hook_scale"},
           {"hook_resid_mid", "hook_mlp_in", "ln2.hook_scale"}}) {
    const auto first = static_cast<std::size_t>(std::find(names.begin(), names.end(), "blocks.1." + run[0]) - names.begin());
    ASSERT_LE(first + run.size(), names.size()) << run[0];
    for (std::size_t i = 0; i < run.size(); ++i) EXPECT_EQ(names[first + i], "blocks.1." + run[i]);
  }
  EXPECT_EQ(copy_points(kBase).size(), 10u);
  // is_copy_point, which Python's names=None leaves out by, says the same of every name.
  const std::vector<std::string> copies = copy_points(kBase);
  for (const std::string& n : names)
    EXPECT_EQ(is_copy_point(n), std::find(copies.begin(), copies.end(), n) != copies.end()) << n;
  for (const char* p : {"hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input"})
    EXPECT_EQ(hook_shape(kBase, std::string("blocks.0.") + p, 3, 5), (Shape{3, 5, 2, 8})) << p;
  EXPECT_EQ(hook_shape(kBase, "blocks.0.hook_mlp_in", 3, 5), (Shape{3, 5, 8}));
  ModelSpec attn_only = kBase;
  attn_only.attn_only = true;
  EXPECT_EQ(copy_points(attn_only).size(), 8u);  // no MLP, no hook_mlp_in
  EXPECT_THROW(check_hook_name(attn_only, "blocks.0.hook_mlp_in"), std::invalid_argument);
}

// Kept (cached), the copies change no bit of the pass, hold the residual
// stream they copy, once per head, and the cache has them all.
TEST(HeadInputs, KeptCopiesChangeNoBitAndHoldWhatTheyCopy) {
  for (const fixtures::Variant& v : fixtures::variants()) {
    SCOPED_TRACE(v.what);
    const auto model = make_model(v.spec);
    const std::vector<int32_t> tokens = some_tokens(v.spec, v.batch * v.seq);
    const Tensor mask = fixtures::pad_mask(v.batch, v.seq);
    const Tensor* m = v.padded ? &mask : nullptr;
    const Tensor plain = logits_with(*model, tokens, v.batch, v.seq, m, nullptr);
    std::vector<std::string> names = copy_points(v.spec);
    const std::size_t copies = names.size();
    for (int64_t l = 0; l < v.spec.layers; ++l)
      for (const char* n : {"hook_resid_pre", "hook_resid_mid"})
        if (!(v.spec.attn_only && std::string(n) == "hook_resid_mid"))
          names.push_back("blocks." + std::to_string(l) + "." + n);
    HookSet kept(v.spec, names);
    EXPECT_TRUE(same_bits(logits_with(*model, tokens, v.batch, v.seq, m, &kept), plain));
    ASSERT_EQ(kept.cache().size(), names.size());
    for (std::size_t i = 0; i < copies; ++i) {
      const std::string& n = names[i];
      const std::string block = n.substr(0, n.find(".hook_") + 1);
      const Tensor copy = kept.cache().at(n);
      const Tensor source = kept.cache().at(block + (n.ends_with("mlp_in") ? "hook_resid_mid" : "hook_resid_pre"));
      if (copy.dim() == 3) {
        EXPECT_TRUE(same_bits(copy, source)) << n;
        continue;
      }
      for (int64_t head = 0; head < v.spec.heads; ++head)
        EXPECT_TRUE(same_bits(copy.select(2, head), source)) << n << " head " << head;
    }
  }
}

// Head 1's q_input replaced: only head 1's queries change, to ln1 of the
// replacement through head 1's rows of W_Q; K, V and head 0's Q stay.
TEST(HeadInputs, ReplacingOneHeadsQInputChangesOnlyThatHeadsQ) {
  const auto model = make_model(kBase);
  const int64_t B = 2, T = 9, head = 1, dk = kBase.d_model / kBase.heads;
  const std::vector<int32_t> tokens = some_tokens(kBase, B * T);
  const std::vector<std::string> qkv{"blocks.1.attn.hook_q", "blocks.1.attn.hook_k", "blocks.1.attn.hook_v"};
  std::vector<std::string> clean_names = qkv;
  clean_names.push_back("blocks.1.hook_q_input");
  HookSet clean(kBase, clean_names);
  logits_with(*model, tokens, B, T, nullptr, &clean);
  Tensor input = clean.cache().at("blocks.1.hook_q_input").clone();
  Tensor own = input.select(2, head);
  own.copy_(core::Generator(31).normal(own.shape(), 0.5, 1.5, DType::f32));
  HookSet patched(kBase, qkv, {{"blocks.1.hook_q_input", input}});
  logits_with(*model, tokens, B, T, nullptr, &patched);
  const auto& c = clean.cache();
  const auto& p = patched.cache();
  EXPECT_TRUE(same_bits(p.at(qkv[1]), c.at(qkv[1])));
  EXPECT_TRUE(same_bits(p.at(qkv[2]), c.at(qkv[2])));
  const Tensor q = p.at(qkv[0]), was = c.at(qkv[0]);
  const LayerNorm& ln1 = *model->block(1).ln1();
  double moved = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < kBase.heads; ++i) {
        // Head i's input through ln1 and head i's rows of W_Q, by hand.
        std::vector<double> bound;
        const std::vector<double> want = linear_rows(
            layer_norm(row(input, b, t, i), ln1.weight().value(), ln1.bias().value()), model->attention(1).q(),
            i * dk, dk, &bound);
        for (int64_t j = 0; j < dk; ++j) {
          const double tolerance = 1e-5 + test::bf16_rounding_bound(bound[static_cast<std::size_t>(j)]);
          EXPECT_NEAR(q.at({b, t, i, j}), want[static_cast<std::size_t>(j)], tolerance) << "head " << i;
          if (i != head)  // its own GEMM now: the fused product's values to rounding
            EXPECT_NEAR(q.at({b, t, i, j}), was.at({b, t, i, j}), 2 * tolerance) << "head " << i;
          else
            moved = std::max(moved, std::abs(q.at({b, t, i, j}) - was.at({b, t, i, j})));
        }
      }
  EXPECT_GT(moved, 0.1);
}

// Every head's input replaced by values equal to the residual stream (at
// hook_attn_in, or at each of Q, K and V's own points) takes the per-head
// path, which gives the normal pass's logits to float rounding; one head's
// input changed then changes them.
TEST(HeadInputs, EqualCopiesOnThePerHeadPathReproduceTheNormalPass) {
  for (const fixtures::Variant& v : fixtures::variants()) {
    for (const std::vector<std::string>& points :
         std::vector<std::vector<std::string>>{{"hook_attn_in"}, {"hook_q_input", "hook_k_input", "hook_v_input"}}) {
      SCOPED_TRACE(std::string(v.what) + ", " + points[0]);
      const auto model = make_model(v.spec);
      const std::vector<int32_t> tokens = some_tokens(v.spec, v.batch * v.seq);
      const Tensor mask = fixtures::pad_mask(v.batch, v.seq);
      const Tensor* m = v.padded ? &mask : nullptr;
      const Tensor plain = logits_with(*model, tokens, v.batch, v.seq, m, nullptr);
      std::vector<std::string> names;
      for (int64_t l = 0; l < v.spec.layers; ++l)
        for (const std::string& p : points) names.push_back("blocks." + std::to_string(l) + "." + p);
      HookSet record(v.spec, names);
      logits_with(*model, tokens, v.batch, v.seq, m, &record);
      std::map<std::string, Tensor> equal;
      for (const std::string& n : names) equal[n] = record.cache().at(n).clone();  // another Variable: replaced
      HookSet same(v.spec, {}, equal);
      const Tensor logits = logits_with(*model, tokens, v.batch, v.seq, m, &same);
      ASSERT_EQ(logits.shape(), plain.shape());
      const std::vector<double> got = logits.to_vector(), want = plain.to_vector();
      double worst = 0.0;
      for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LT(worst, test::precision_bound(2e-5, 5e-2));
      equal.at(names[0]).select(2, 0).fill_(1.0);
      HookSet one(v.spec, {}, equal);
      const Tensor one_head = logits_with(*model, tokens, v.batch, v.seq, m, &one);
      EXPECT_FALSE(same_bits(one_head, logits));
    }
  }
}

// mlp_in replaced: resid_mid (and so the skip path) stays, the MLP reads ln2
// of the replacement, and resid_post is resid_mid + that MLP's output.
TEST(HeadInputs, ReplacedMlpInLeavesResidMidAndFeedsTheMlp) {
  ModelSpec no_ln = kBase;
  no_ln.layernorm = false;
  no_ln.activation = "relu";
  for (const ModelSpec& spec : {kBase, no_ln}) {
    SCOPED_TRACE(spec.layernorm ? "LayerNorm, GELU" : "no LayerNorm, ReLU");
    const auto model = make_model(spec);
    const int64_t B = 2, T = 5, d = spec.d_model;
    const std::vector<int32_t> tokens = some_tokens(spec, B * T);
    const std::vector<std::string> names{"blocks.0.hook_resid_mid", "blocks.0.hook_mlp_out",
                                         "blocks.0.hook_resid_post"};
    HookSet clean(spec, names);
    logits_with(*model, tokens, B, T, nullptr, &clean);
    const Tensor given = core::Generator(41).normal({B, T, d}, 0.0, 1.0, DType::f32);
    HookSet patched(spec, names, {{"blocks.0.hook_mlp_in", given}});
    logits_with(*model, tokens, B, T, nullptr, &patched);
    const auto& p = patched.cache();
    EXPECT_TRUE(same_bits(p.at(names[0]), clean.cache().at(names[0])));
    EXPECT_FALSE(same_bits(p.at(names[1]), clean.cache().at(names[1])));
    const TransformerBlock& block = model->block(0);
    const MLP& mlp = *block.mlp();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> x = row(given, b, t);
        if (block.ln2()) x = layer_norm(x, block.ln2()->weight().value(), block.ln2()->bias().value());
        std::vector<double> bound1, bound2;
        std::vector<double> hidden = linear_rows(x, mlp.fc1(), 0, spec.d_ff, &bound1);
        for (double& h : hidden) h = spec.activation == "relu" ? std::max(h, 0.0) : 0.5 * h * (1 + std::erf(h / std::sqrt(2.0)));
        const std::vector<double> out = linear_rows(hidden, mlp.fc2(), 0, d, &bound2);
        double fc1_bound = 0.0;
        for (double a : bound1) fc1_bound = std::max(fc1_bound, a);
        for (int64_t j = 0; j < d; ++j) {
          const auto jj = static_cast<std::size_t>(j);
          EXPECT_NEAR(p.at(names[1]).at({b, t, j}), out[jj],
                      1e-5 + test::bf16_rounding_bound(bound2[jj] + fc1_bound * 4.0));
          // The skip path: the residual add of resid_mid and this output.
          EXPECT_EQ(p.at(names[2]).at({b, t, j}),
                    static_cast<double>(static_cast<float>(p.at(names[0]).at({b, t, j})) +
                                        static_cast<float>(p.at(names[1]).at({b, t, j}))));
        }
      }
  }
}

// What the pass with `hooks` throws (std::invalid_argument), "" if nothing.
std::string refusal(const ModelSpec& spec, HookSet hooks) {
  const auto model = make_model(spec);
  try {
    logits_with(*model, some_tokens(spec, 2 * 5), 2, 5, nullptr, &hooks);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A replaced head input leaves ln1's points of its block without an
// activation: wanting one then is refused, naming both points.
TEST(HeadInputs, AReplacedHeadInputWithItsBlocksLn1PointIsRefused) {
  const Tensor per_head = core::Generator(51).normal({2, 5, 2, 8}, 0.0, 1.0, DType::f32);
  const std::string msg =
      refusal(kBase, HookSet(kBase, {"blocks.0.ln1.hook_normalized"}, {{"blocks.0.hook_k_input", per_head}}));
  EXPECT_NE(msg.find("blocks.0.ln1.hook_normalized"), std::string::npos) << msg;
  EXPECT_NE(msg.find("blocks.0.hook_k_input"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a pass of its own"), std::string::npos) << msg;
  const std::string scale =
      refusal(kBase, HookSet(kBase, {"blocks.1.ln1.hook_scale"}, {{"blocks.1.hook_attn_in", per_head}}));
  EXPECT_NE(scale.find("blocks.1.ln1.hook_scale"), std::string::npos) << scale;
  EXPECT_NE(scale.find("blocks.1.hook_attn_in"), std::string::npos) << scale;
  // Another block's ln1, and a model without ln1: nothing to refuse.
  EXPECT_EQ(refusal(kBase, HookSet(kBase, {"blocks.1.ln1.hook_normalized"}, {{"blocks.0.hook_q_input", per_head}})),
            "");
  ModelSpec no_ln = kBase;
  no_ln.layernorm = false;
  EXPECT_EQ(refusal(no_ln, HookSet(no_ln, {"blocks.0.hook_resid_pre"}, {{"blocks.0.hook_q_input", per_head}})), "");
  // Gradients are deltas, which replace: the same refusal.
  const auto model = make_model(kBase, DType::f64);
  const std::vector<int32_t> tokens = some_tokens(kBase, 10), targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  EXPECT_THROW(activation_gradients(*model, tokens, 2, 5, targets, {"blocks.0.hook_v_input", "blocks.0.ln1.hook_scale"}),
               std::invalid_argument);
}

// The gradients at the copies add up as the graph says: the heads' inputs
// to Q, K and V sum to hook_attn_in's (each is its copy), every head's
// hook_attn_in plus the skip path's resid_mid gives resid_pre's, and
// mlp_in's plus resid_post's gives resid_mid's. (The values against finite
// differences: layers/gradcheck_cases.cpp.)
TEST(HeadInputs, GradientsAtTheCopiesAddUpToTheResidualStreams) {
  const auto model = make_model(kBase, DType::f64);
  const std::vector<int32_t> tokens = some_tokens(kBase, 10), targets{1, -1, 3, 0, 2, 6, 5, -1, 4, 1};
  std::vector<std::string> names;
  for (const char* p : {"hook_resid_pre", "hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input",
                        "hook_resid_mid", "hook_mlp_in", "hook_resid_post"})
    names.push_back(std::string("blocks.0.") + p);
  const auto g = activation_gradients(*model, tokens, 2, 5, targets, names);
  const auto grad = [&](const char* p) { return g.at(std::string("blocks.0.") + p); };
  double largest = 0.0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t j = 0; j < kBase.d_model; ++j) {
        double heads = 0.0;
        for (int64_t i = 0; i < kBase.heads; ++i) {
          const double split = grad("hook_q_input").at({b, t, i, j}) + grad("hook_k_input").at({b, t, i, j}) +
                               grad("hook_v_input").at({b, t, i, j});
          EXPECT_NEAR(grad("hook_attn_in").at({b, t, i, j}), split, 1e-12);
          heads += grad("hook_attn_in").at({b, t, i, j});
          largest = std::max(largest, std::abs(grad("hook_q_input").at({b, t, i, j})));
        }
        EXPECT_NEAR(grad("hook_resid_pre").at({b, t, j}), grad("hook_resid_mid").at({b, t, j}) + heads, 1e-12);
        EXPECT_NEAR(grad("hook_resid_mid").at({b, t, j}),
                    grad("hook_resid_post").at({b, t, j}) + grad("hook_mlp_in").at({b, t, j}), 1e-12);
      }
  EXPECT_GT(largest, 1e-4);
}

}  // namespace
}  // namespace headlab::layers

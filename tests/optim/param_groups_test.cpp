#include "optim/param_groups.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

namespace headlab::optim {
namespace {

using testing::param;
using testing::param_shaped;
using testing::set_grad;
using testing::values;

std::vector<std::string> names_of(const ParamGroup& group) {
  std::vector<std::string> names;
  for (const auto& [name, p] : group.params) names.push_back(name);
  return names;
}

// Names and shapes as layers::Transformer::named_parameters() gives them.
NamedParameters transformer_like() {
  return {
      {"tok_emb.weight", param_shaped({5, 4})},
      {"blocks.0.ln1.weight", param_shaped({4})},
      {"blocks.0.ln1.bias", param_shaped({4})},
      {"blocks.0.attn.q.weight", param_shaped({4, 4})},
      {"blocks.0.attn.q.bias", param_shaped({4})},
      {"blocks.0.ln2.weight", param_shaped({1, 4})},  // 2-D, but a LayerNorm by name
      {"blocks.0.mlp.fc1.weight", param_shaped({8, 4})},
      {"blocks.0.mlp.fc1.bias", param_shaped({1, 8})},  // 2-D, but a bias by name
      {"final_norm.scale", param_shaped({1, 4})},
      {"ln_f.weight", param_shaped({4})},
      {"head.weight", param_shaped({5, 4})},
  };
}

TEST(ParamGroups, BiasesNormsAndVectorsGoToAGroupWithoutDecay) {
  const std::vector<ParamGroup> groups = make_param_groups(transformer_like(), 0.1, true);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(names_of(groups[0]), (std::vector<std::string>{"tok_emb.weight", "blocks.0.attn.q.weight",
                                                           "blocks.0.mlp.fc1.weight", "head.weight"}));
  EXPECT_EQ(groups[0].weight_decay.value(), 0.1);
  EXPECT_EQ(
      names_of(groups[1]),
      (std::vector<std::string>{"blocks.0.ln1.weight", "blocks.0.ln1.bias", "blocks.0.attn.q.bias",
                                "blocks.0.ln2.weight", "blocks.0.mlp.fc1.bias", "final_norm.scale", "ln_f.weight"}));
  EXPECT_EQ(groups[1].weight_decay.value(), 0.0);
}

TEST(ParamGroups, WithoutTheFlagEverythingIsDecayed) {
  const std::vector<ParamGroup> groups = make_param_groups(transformer_like(), 0.1, false);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].params.size(), 11u);
  EXPECT_EQ(groups[0].weight_decay.value(), 0.1);
}

TEST(ParamGroups, EmptyGroupsAreLeftOut) {
  const std::vector<ParamGroup> groups = make_param_groups({{"fc.weight", param_shaped({2, 2})}}, 0.1, true);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].weight_decay.value(), 0.1);
}

TEST(ParamGroups, NameRuleLooksAtModuleNamesNotAtSubstringsOfTheLastOne) {
  const autograd::Variable matrix = param_shaped({2, 2});
  EXPECT_TRUE(is_no_decay_parameter("blocks.3.ln1.weight", matrix));
  EXPECT_TRUE(is_no_decay_parameter("encoder.LayerNorm.weight", matrix));
  EXPECT_TRUE(is_no_decay_parameter("bias", matrix));
  EXPECT_FALSE(is_no_decay_parameter("blocks.3.attn.k.weight", matrix));
  EXPECT_FALSE(is_no_decay_parameter("kernel_norm_weight", matrix));  // no module named like a norm
  EXPECT_FALSE(is_no_decay_parameter("attn.bias_scale", matrix));
  EXPECT_TRUE(is_no_decay_parameter("attn.gates", param_shaped({4})));
}

TEST(ParamGroups, NegativeWeightDecayIsRejected) {
  EXPECT_THROW(make_param_groups(transformer_like(), -0.1, true), std::invalid_argument);
}

TEST(ParamGroups, AdamWDecaysOnlyTheDecayGroup) {
  // Zero gradients: the moments stay 0, so only the decoupled decay moves p.
  const autograd::Variable weight(core::Tensor::full({2, 2}, 2.0, core::DType::f64), true);
  const autograd::Variable bias = param({2.0, 2.0});
  const NamedParameters named{{"fc.weight", weight}, {"fc.bias", bias}};
  AdamW adamw(make_param_groups(named, 0.5, true), AdamWOptions(0.1));
  set_grad(weight, {0.0, 0.0, 0.0, 0.0});
  set_grad(bias, {0.0, 0.0});
  adamw.step();
  EXPECT_EQ(values(weight), std::vector<double>(4, 2.0 * (1.0 - 0.1 * 0.5)));
  EXPECT_EQ(values(bias), (std::vector<double>{2.0, 2.0}));
}

TEST(ParamGroups, GroupWeightDecayOverridesTheDefault) {
  const autograd::Variable a = param({2.0});
  const autograd::Variable b = param({2.0});
  const autograd::Variable c = param({2.0});
  std::vector<ParamGroup> groups{ParamGroup{.params = {{"a", a}}, .weight_decay = 0.5, .lr_scale = 1.0},
                                 ParamGroup{.params = {{"b", b}}, .weight_decay = 0.0, .lr_scale = 1.0},
                                 ParamGroup{.params = {{"c", c}}, .weight_decay = {}, .lr_scale = 1.0}};
  AdamW adamw(std::move(groups), AdamWOptions(0.1).weight_decay(0.2));
  for (const auto& v : {a, b, c}) set_grad(v, {0.0});
  adamw.step();
  EXPECT_DOUBLE_EQ(values(a)[0], 2.0 * (1.0 - 0.1 * 0.5));
  EXPECT_EQ(values(b)[0], 2.0);
  EXPECT_DOUBLE_EQ(values(c)[0], 2.0 * (1.0 - 0.1 * 0.2));
  EXPECT_EQ(adamw.param_groups()[2].weight_decay.value(), 0.2);
}

TEST(ParamGroups, SetLrKeepsEachGroupsRelativeScale) {
  const autograd::Variable a = param({0.0});
  const autograd::Variable b = param({0.0});
  std::vector<ParamGroup> groups{ParamGroup{.params = {{"a", a}}, .weight_decay = {}, .lr_scale = 1.0},
                                 ParamGroup{.params = {{"b", b}}, .weight_decay = {}, .lr_scale = 0.25}};
  SGD sgd(std::move(groups), SGDOptions(1.0));
  sgd.set_lr(0.5);
  EXPECT_EQ(sgd.lr(), 0.5);
  set_grad(a, {1.0});
  set_grad(b, {1.0});
  sgd.step();
  EXPECT_EQ(values(a)[0], -0.5);
  EXPECT_EQ(values(b)[0], -0.125);
  EXPECT_THROW(sgd.set_lr(-1.0), std::invalid_argument);
}

TEST(ParamGroups, DuplicateNamesOrParametersAreRejected) {
  const autograd::Variable a = param({0.0});
  const autograd::Variable b = param({0.0});
  EXPECT_THROW(SGD(NamedParameters{{"x", a}, {"x", b}}), std::invalid_argument);
  EXPECT_THROW(SGD(NamedParameters{{"x", a}, {"y", a}}), std::invalid_argument);
  EXPECT_THROW(SGD(NamedParameters{{"x", a}, {"y", autograd::Variable()}}), std::invalid_argument);
  std::vector<ParamGroup> bad_scale{ParamGroup{.params = {{"a", a}}, .weight_decay = {}, .lr_scale = 0.0}};
  EXPECT_THROW(SGD(std::move(bad_scale)), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::optim

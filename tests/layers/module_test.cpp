// layers::Module: registration, dotted names, look-up, modes, gradients.
#include "layers/module.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/random.h"
#include "layers/linear.h"
#include "layers/module_list.h"

namespace headlab::layers {
namespace {

using core::Tensor;

struct Leafy : Module {
  Leafy() {
    register_parameter("a", Tensor::zeros({2, 3}));
    register_parameter("b", Tensor::zeros({4}));
  }
};

struct Tree : Module {
  Tree() {
    register_parameter("first", Tensor::zeros({1}));
    left = register_module("left", std::make_shared<Leafy>());
    auto list = register_module("list", std::make_shared<ModuleList>());
    list->push_back(std::make_shared<Leafy>());
    list->push_back(std::make_shared<Leafy>());
    register_parameter("last", Tensor::zeros({5}));
  }
  std::shared_ptr<Leafy> left;
};

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

TEST(Module, NamedParametersAreDottedInRegistrationOrder) {
  Tree tree;
  EXPECT_EQ(names_of(tree), (std::vector<std::string>{"first", "last", "left.a", "left.b", "list.0.a", "list.0.b",
                                                      "list.1.a", "list.1.b"}));
}

TEST(Module, RegisteredParametersRequireGradAndShareTheValue) {
  Leafy leafy;
  Variable a = leafy.parameter("a");
  EXPECT_TRUE(a.requires_grad());
  EXPECT_TRUE(a.is_leaf());
  a.mutable_value().fill_(3.0);
  EXPECT_EQ(leafy.named_parameters()[0].second.value().at({1, 2}), 3.0);
}

TEST(Module, ParametersMatchNamedParametersInOrder) {
  Tree tree;
  const auto named = tree.named_parameters();
  const auto plain = tree.parameters();
  ASSERT_EQ(named.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(named[i].second.node(), plain[i].node());
}

TEST(Module, ParameterLooksUpADottedName) {
  Tree tree;
  EXPECT_EQ(tree.parameter("list.1.b").shape(), (core::Shape{4}));
  EXPECT_EQ(tree.parameter("left.a").node(), tree.left->parameter("a").node());
}

TEST(Module, MissingParameterNameIsAnErrorNamingIt) {
  Tree tree;
  try {
    tree.parameter("left.c");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("left.c"), std::string::npos) << e.what();
  }
}

TEST(Module, DuplicateOrDottedNamesAreErrors) {
  Leafy leafy;
  EXPECT_THROW(leafy.register_parameter("a", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(leafy.register_parameter("x.y", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(leafy.register_parameter("", Tensor::zeros({1})), std::invalid_argument);
  EXPECT_THROW(leafy.register_module("b", std::make_shared<Leafy>()), std::invalid_argument);
  EXPECT_THROW(leafy.register_module("c", std::shared_ptr<Leafy>()), std::invalid_argument);
}

TEST(Module, NumParametersCountsEveryScalar) {
  Tree tree;
  EXPECT_EQ(tree.num_parameters(), 1 + 5 + 3 * (6 + 4));
}

TEST(Module, TrainAndEvalPropagateToEveryDescendant) {
  Tree tree;
  EXPECT_TRUE(tree.is_training());
  tree.eval();
  EXPECT_FALSE(tree.is_training());
  EXPECT_FALSE(tree.left->is_training());
  for (auto& [name, child] : tree.named_children()) {
    EXPECT_FALSE(child->is_training()) << name;
    for (auto& [n2, grandchild] : child->named_children()) EXPECT_FALSE(grandchild->is_training()) << n2;
  }
  tree.train();
  EXPECT_TRUE(tree.left->is_training());
  EXPECT_TRUE(tree.named_children()[1].second->named_children()[1].second->is_training());
}

TEST(Module, ChildRegisteredIntoAnEvalModuleIsInEval) {
  Leafy leafy;
  leafy.eval();
  auto child = leafy.register_module("child", std::make_shared<Leafy>());
  EXPECT_FALSE(child->is_training());
}

TEST(Module, ZeroGradDropsEveryGradient) {
  Tree tree;
  for (auto& p : tree.parameters()) autograd::sum(autograd::mul(p, 2.0)).backward();
  for (auto& p : tree.parameters()) ASSERT_TRUE(p.has_grad());
  tree.zero_grad();
  for (auto& [name, p] : tree.named_parameters()) EXPECT_FALSE(p.has_grad()) << name;
}

TEST(Module, ReplaceParameterRebindsTheDottedName) {
  Tree tree;
  const Variable replacement(Tensor::ones({2, 3}), true);
  tree.replace_parameter("list.1.a", replacement);
  EXPECT_EQ(tree.parameter("list.1.a").node(), replacement.node());
  EXPECT_NE(tree.parameter("list.0.a").node(), replacement.node());
}

TEST(Module, ReplacedParameterIsWhatTheLayerComputesWith) {
  core::Generator gen(0);
  Linear lin(LinearOptions{.in_features = 2, .out_features = 1, .bias = false}, gen, core::DType::f64);
  const Variable w(Tensor::from_vector({3, 4}, {1, 2}, core::DType::f64), true);
  lin.replace_parameter("weight", w);
  const Variable y = lin.forward(Variable(Tensor::from_vector({1, 1}, {1, 2}, core::DType::f64)));
  EXPECT_EQ(y.value().item(), 7.0);
  autograd::sum(y).backward();
  EXPECT_TRUE(w.has_grad());
}

TEST(Module, ReplaceParameterRejectsUnknownNamesAndOtherShapes) {
  Tree tree;
  EXPECT_THROW(tree.replace_parameter("left.z", Variable(Tensor::zeros({2, 3}))), std::invalid_argument);
  EXPECT_THROW(tree.replace_parameter("nope.a", Variable(Tensor::zeros({2, 3}))), std::invalid_argument);
  try {
    tree.replace_parameter("left.a", Variable(Tensor::zeros({3, 2})));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[3, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tree.replace_parameter("left.a", Variable(Tensor::zeros({2, 3}, core::DType::f64))),
               std::invalid_argument);
}

}  // namespace
}  // namespace headlab::layers

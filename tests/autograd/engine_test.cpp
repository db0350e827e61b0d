// The engine: handles, backward, accumulation, graph release, no-grad, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autograd/grad_in_place.h"
#include "autograd/ops.h"
#include "autograd/variable.h"
#include "test_util.h"

namespace headlab::autograd {
namespace {

using testing::all_near;
using testing::grad_of;
using testing::message_of;
using testing::param;
using testing::tensor;

TEST(Variable, CopiesShareValueAndGradient) {
  Variable x = param({1, 2}, {2});
  Variable copy = x;
  sum(x * 3.0).backward();
  EXPECT_EQ(copy.node(), x.node());
  EXPECT_TRUE(all_near(grad_of(copy), {3, 3}));
}

TEST(Backward, FromAScalarSeedsGradientOne) {
  Variable x = param({1, -2, 3}, {3});
  sum(x * x).backward();
  EXPECT_TRUE(all_near(grad_of(x), {2, -4, 6}));
}

TEST(Backward, WithAnExplicitOutputGradient) {
  Variable x = param({1, 2, 3, 4}, {2, 2});
  Variable y = x * 3.0;
  y.backward(tensor({1, 0, -1, 2}, {2, 2}));
  EXPECT_TRUE(all_near(grad_of(x), {3, 0, -3, 6}));
}

TEST(Backward, DiamondSumsBothPathsThroughASharedIntermediate) {
  // h = exp(x) feeds two branches: y = h*h + 2h, so dy/dx = (2h + 2) h.
  Variable x = param({0.5, -1.0}, {2});
  Variable h = exp(x);
  Variable y = sum(h * h + h * 2.0);
  y.backward();
  std::vector<double> expected;
  for (double v : {0.5, -1.0}) expected.push_back((2 * std::exp(v) + 2) * std::exp(v));
  EXPECT_TRUE(all_near(grad_of(x), expected));
}

TEST(Backward, LeafUsedTwiceInOneOpGetsBothGradients) {
  Variable x = param({3}, {1});
  sum(x * x).backward();
  EXPECT_TRUE(all_near(grad_of(x), {6}));
}

TEST(Backward, GradientsAccumulateAcrossCallsUntilZeroGrad) {
  Variable x = param({1, 2}, {2});
  sum(x * 2.0).backward();
  sum(x * 5.0).backward();
  EXPECT_TRUE(all_near(grad_of(x), {7, 7}));
  x.zero_grad();
  EXPECT_FALSE(x.has_grad());
}

TEST(Backward, IntermediateGradientsAreNotKept) {
  Variable x = param({1, 2}, {2});
  Variable h = x * 2.0;
  sum(h).backward();
  EXPECT_FALSE(h.has_grad());
  EXPECT_TRUE(x.has_grad());
}

TEST(Backward, LeafGradientsNeverShareStorage) {
  // add hands the same gradient tensor to both inputs; an in-place update of
  // one (gradient clipping) must not change the other.
  Variable a = param({1, 2}, {2});
  Variable b = param({3, 4}, {2});
  Variable y = a + b;
  y.backward(tensor({1, 1}, {2}));
  EXPECT_FALSE(a.grad().shares_storage(b.grad()));
  EXPECT_TRUE(a.grad().is_contiguous());
}

// An op whose backward records whether its input's gradient could take its
// own in place (grad_to_add_into), then adds its gradient as usual.
Variable probe_in_place(const Variable& x, bool& could) {
  return Variable::from_op(
      x.value().clone(), {x},
      [&could](std::vector<Variable>& in, const Tensor& g) {
        could = grad_to_add_into(in[0]).defined();
        in[0].accumulate_grad(g);
      },
      "probe");
}

TEST(GradToAddInto, OnlyAnIntermediatesGradientThatNothingElseHolds) {
  Variable x = param({1, 2}, {2});
  // h * 2.0 runs first (reverse topological order) and gives h a fresh
  // gradient that h alone holds: the probe may add into it.
  Variable h = x * 3.0;
  bool could = false;
  (probe_in_place(h, could) + h * 2.0).backward(tensor({1, 1}, {2}));
  EXPECT_TRUE(could);
  EXPECT_TRUE(all_near(grad_of(x), {9, 9}));
  // h + 0.0 hands on the very gradient the probe's output also holds.
  x.zero_grad();
  Variable h2 = x * 3.0;
  could = true;
  (probe_in_place(h2, could) + (h2 + 0.0)).backward(tensor({1, 1}, {2}));
  EXPECT_FALSE(could);
  EXPECT_TRUE(all_near(grad_of(x), {6, 6}));
  // A leaf's gradient may be held outside the graph (an optimizer's state).
  x.zero_grad();
  could = true;
  (probe_in_place(x, could) + x * 2.0).backward(tensor({1, 1}, {2}));
  EXPECT_FALSE(could);
  EXPECT_TRUE(all_near(grad_of(x), {3, 3}));
}

TEST(Backward, FreesTheGraphAfterwards) {
  Variable x = param({1, 2}, {2});
  Variable y = sum(exp(x));
  y.backward();
  EXPECT_TRUE(y.node()->freed);
  EXPECT_TRUE(y.node()->inputs.empty());
  EXPECT_FALSE(static_cast<bool>(y.node()->backward));
  EXPECT_FALSE(x.node()->freed);  // leaves stay usable
}

// --- values released once only consumers that never read them hold them ---

TEST(Release, AnAddsInputGoesWhenItsLastHandleDoesAndTheGradientsStay) {
  Variable x = param({1, 2, 3}, {3});
  std::weak_ptr<core::Storage> storage;
  Variable y;
  {
    const Variable e = x * x;  // mul saves nothing: only e's handle and the add hold its value
    storage = e.value().storage();
    y = e + x;  // add's backward reads neither value
    EXPECT_FALSE(storage.expired());  // e's handle still holds it
  }
  EXPECT_TRUE(storage.expired());
  const Variable& released = y.node()->inputs[0];
  EXPECT_TRUE(released.node()->released());
  EXPECT_FALSE(y.node()->inputs[1].node()->released());  // x: a leaf keeps its value
  // Its shape stays for the gradient's checks; its value is gone.
  EXPECT_EQ(released.shape(), (Shape{3}));
  EXPECT_EQ(released.size(-1), 3);
  EXPECT_EQ(released.numel(), 3);
  EXPECT_THROW(released.size(1), std::invalid_argument);
  EXPECT_THROW(released.value(), std::logic_error);
  // d/dx sum((x^2 + x)^2) = 2 (x^2 + x) (2x + 1)
  sum(y * y).backward();
  EXPECT_TRUE(all_near(grad_of(x), {2 * 2 * 3, 2 * 6 * 5, 2 * 12 * 7}));
}

TEST(Release, AValueThatABackwardReadsOrAHandleHoldsStays) {
  Variable x = param({1, 2}, {2});
  Variable e = x * x;
  const std::weak_ptr<core::Storage> storage = e.value().storage();
  Variable y = (e + x) * e;  // mul reads e
  Variable kept = exp(x);
  const Variable z = kept + x;
  e = Variable();
  EXPECT_FALSE(storage.expired());
  EXPECT_EQ(kept.value().shape(), (Shape{2}));  // the caller's handle can still read it
  y = Variable();  // the graph goes, and e's value with it
  EXPECT_TRUE(storage.expired());
}

TEST(Release, AssigningOverTheLastHandleReleasesAndRetainGraphStillWorks) {
  Variable x = param({1, 2}, {2});
  Variable e = x * x;
  const std::weak_ptr<core::Storage> storage = e.value().storage();
  const Variable y = sum((e - x) + 1.0);
  e = x;  // the assignment drops the product's last handle
  EXPECT_TRUE(storage.expired());
  y.backward(/*retain_graph=*/true);
  y.backward();  // d/dx sum(x^2 - x + 1) = 2x - 1, twice
  EXPECT_TRUE(all_near(grad_of(x), {2 * 1.0, 2 * 3.0}));
}

TEST(Backward, SecondBackwardThroughAFreedGraphThrowsAClearError) {
  Variable x = param({1, 2}, {2});
  Variable y = sum(exp(x));
  y.backward();
  const std::string msg = message_of<std::runtime_error>([&] { y.backward(); });
  EXPECT_NE(msg.find("freed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("retain_graph"), std::string::npos) << msg;
}

TEST(Backward, ThroughAFreedIntermediateThrows) {
  Variable x = param({1, 2}, {2});
  Variable h = exp(x);
  sum(h).backward();
  Variable z = sum(h * 2.0);  // uses h, whose graph is gone
  const std::string msg = message_of<std::runtime_error>([&] { z.backward(); });
  EXPECT_NE(msg.find("'exp'"), std::string::npos) << msg;
}

TEST(Backward, RetainGraphAllowsASecondPass) {
  Variable x = param({1, 2}, {2});
  Variable y = sum(x * x);
  y.backward(/*retain_graph=*/true);
  EXPECT_FALSE(y.node()->freed);
  y.backward();
  EXPECT_TRUE(all_near(grad_of(x), {4, 8}));
}

TEST(Backward, OnANonScalarWithoutGradientThrowsNamingTheShape) {
  Variable x = param({1, 2, 3, 4}, {2, 2});
  Variable y = x * 2.0;
  const std::string msg = message_of<std::invalid_argument>([&] { y.backward(); });
  EXPECT_NE(msg.find("[2, 2]"), std::string::npos) << msg;
}

TEST(Backward, WithAWrongShapeGradientThrows) {
  Variable x = param({1, 2, 3, 4}, {2, 2});
  Variable y = x * 2.0;
  const std::string msg = message_of<std::invalid_argument>([&] { y.backward(tensor({1, 1, 1, 1}, {4})); });
  EXPECT_NE(msg.find("[4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 2]"), std::string::npos) << msg;
  EXPECT_THROW(y.backward(tensor({1, 1, 1, 1}, {2, 2}, DType::f32)), std::invalid_argument);
}

TEST(Backward, OnAVariableThatNeedsNoGradientThrows) {
  Variable c(tensor({1}, {1}));
  EXPECT_THROW(sum(c * 2.0).backward(), std::runtime_error);
}

TEST(AccumulateGrad, AWrongShapeFromABackwardNamesTheOp) {
  Variable x = param({1, 2, 3}, {3});
  Variable y = Variable::from_op(
      x.value().clone(), {x},
      [](std::vector<Variable>& in, const Tensor&) { in[0].accumulate_grad(Tensor::ones({2}, DType::f64)); },
      "broken_op");
  const std::string msg = message_of<std::invalid_argument>([&] { y.backward(tensor({1, 1, 1}, {3})); });
  EXPECT_NE(msg.find("broken_op"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
}

TEST(AccumulateGrad, AWrongDtypeThrows) {
  Variable x = param({1, 2}, {2});
  EXPECT_THROW(x.accumulate_grad(Tensor::ones({2}, DType::f32)), std::invalid_argument);
  EXPECT_THROW(x.set_grad(Tensor::ones({3}, DType::f64)), std::invalid_argument);
}

TEST(NoGrad, RecordsNothing) {
  Variable x = param({1, 2}, {2});
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    Variable y = exp(x) * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    EXPECT_TRUE(y.node()->inputs.empty());
    EXPECT_THROW(sum(y).backward(), std::runtime_error);
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(NoGrad, NestsAndIsPerThread) {
  NoGradGuard outer;
  {
    NoGradGuard inner;
  }
  EXPECT_FALSE(grad_enabled());  // the inner guard restores "off"
  bool other_thread = false;
  std::thread t([&] { other_thread = grad_enabled(); });
  t.join();
  EXPECT_TRUE(other_thread);
}

TEST(NoGrad, AGradModeGuardEnablesInsideANoGradGuardAndRestoresIt) {
  Variable x = param({1, 2}, {2});
  NoGradGuard outer;
  {
    GradModeGuard enabled(true);  // what a Python hook called from a forward pass runs under
    EXPECT_TRUE(grad_enabled());
    sum(exp(x)).backward();
  }
  EXPECT_FALSE(grad_enabled());
  EXPECT_TRUE(x.has_grad());
}

TEST(GradOnlyFor, OnlyTheGivenLeavesReceiveAGradient) {
  Variable w = param({2, 3}, {2});  // a "parameter" that already holds a gradient
  w.set_grad(tensor({7, 7}, {2}));
  Variable g = param({0.5, -1}, {2});  // the leaf we want dL/dg of
  {
    GradOnlyFor only_g({g});
    EXPECT_FALSE(w.requires_grad());
    EXPECT_TRUE(g.requires_grad());
    Variable y = w * w;
    EXPECT_FALSE(y.requires_grad()) << "nothing leads to g: no graph";
    sum(y * g).backward();
  }
  EXPECT_TRUE(all_near(grad_of(g), {4, 9}));
  EXPECT_TRUE(all_near(grad_of(w), {7, 7})) << "w's gradient is untouched";
  EXPECT_TRUE(w.requires_grad()) << "outside the scope w is a leaf like before";
}

TEST(GradOnlyFor, NestsAndIsPerThread) {
  Variable a = param({1}, {1});
  Variable b = param({1}, {1});
  GradOnlyFor outer({a});
  {
    GradOnlyFor inner({b});
    EXPECT_FALSE(a.requires_grad());
    EXPECT_TRUE(b.requires_grad());
  }
  EXPECT_TRUE(a.requires_grad());
  EXPECT_FALSE(b.requires_grad());
  bool other_thread = false;
  std::thread t([&] { other_thread = b.requires_grad(); });
  t.join();
  EXPECT_TRUE(other_thread);
}

TEST(Detach, SharesTheValueWithoutHistory) {
  Variable x = param({1, 2}, {2});
  Variable y = x * 2.0;
  Variable d = y.detach();
  EXPECT_TRUE(d.value().shares_storage(y.value()));
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  // A path through the detached value contributes no gradient.
  sum(d * x).backward();
  EXPECT_TRUE(all_near(grad_of(x), {2, 4}));
}

TEST(RequiresGrad, CanOnlyBeChangedOnLeaves) {
  Variable x(tensor({1}, {1}));
  x.set_requires_grad(true);
  EXPECT_TRUE(x.requires_grad());
  Variable y = x * 2.0;
  EXPECT_THROW(y.set_requires_grad(false), std::invalid_argument);
}

TEST(RequiresGrad, InputsWithoutItGetNoGradient) {
  Variable w = param({2}, {1});
  Variable c(tensor({5}, {1}));
  sum(w * c).backward();
  EXPECT_TRUE(all_near(grad_of(w), {5}));
  EXPECT_FALSE(c.has_grad());
}

TEST(DeepGraph, ChainOf100000OpsBackpropagatesWithoutStackOverflow) {
  Variable x = param({1, 2}, {2});
  Variable y = x;
  for (int i = 0; i < 100000; ++i) y = y + 0.5;
  sum(y).backward();
  EXPECT_TRUE(all_near(y.value().to_vector(), {50001, 50002}, 1e-6));
  EXPECT_TRUE(all_near(grad_of(x), {1, 1}));
}

TEST(DeepGraph, DestroyingAnUnusedChainOf100000OpsDoesNotOverflow) {
  const int64_t before = live_node_count();
  {
    Variable x = param({1}, {1});
    Variable y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.0;
    EXPECT_GE(live_node_count(), before + 100000);
  }
  EXPECT_EQ(live_node_count(), before);
}

}  // namespace
}  // namespace headlab::autograd

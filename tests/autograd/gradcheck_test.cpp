// Every op passes the float64 gradcheck, and gradcheck itself catches a wrong backward.
#include "autograd/gradcheck.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"
#include "core/random.h"
#include "test_util.h"

namespace headlab::autograd {
namespace {

using Vars = std::vector<Variable>;

Tensor normal(const Shape& shape, uint64_t seed) { return core::Generator(seed).normal(shape, 0.0, 1.0, DType::f64); }

// --- the registry ---

class OpRegistry : public ::testing::TestWithParam<std::size_t> {};

TEST_P(OpRegistry, PassesFloat64Gradcheck) {
  const GradcheckCase& c = op_gradcheck_cases().at(GetParam());
  const GradcheckResult r = c.run();
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  EXPECT_GT(r.entries, 0) << c.name;
  EXPECT_LE(r.max_abs_err, 1e-5) << c.name << ": " << r.message;
}

std::string case_test_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name;
  for (char ch : op_gradcheck_cases().at(info.param).name)
    name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return std::to_string(info.param) + "_" + name;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpRegistry, ::testing::Range<std::size_t>(0, op_gradcheck_cases().size()),
                         case_test_name);

TEST(OpRegistry, CoversEveryOpOfTheLibrary) {
  const std::vector<std::string> ops = {
      "add",     "sub",       "mul",    "div",        "neg",     "exp",           "log",
      "sqrt",    "pow",       "tanh",   "relu",       "sigmoid", "gelu",          "sum",
      "mean",    "max",       "matmul", "reshape",    "transpose", "permute",     "slice",
      "expand",  "concat",    "split",  "softmax",    "log_softmax", "cross_entropy", "layer_norm",
      "embedding", "masked_fill", "dropout", "broadcast", "transposed", "axes"};
  for (const std::string& op : ops) {
    bool found = false;
    for (const GradcheckCase& c : op_gradcheck_cases()) found = found || c.name.find(op) != std::string::npos;
    EXPECT_TRUE(found) << "no gradcheck case mentions '" << op << "'";
  }
  std::set<std::string> names;
  for (const GradcheckCase& c : op_gradcheck_cases()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

// --- gradcheck can fail ---

// x^2 with a backward that forgets the factor 2.
Variable wrong_square(const Variable& x) {
  return Variable::from_op(
      core::mul(x.value(), x.value()), {x},
      [](std::vector<Variable>& in, const Tensor& g) { in[0].accumulate_grad(core::mul(g, in[0].value())); },
      "wrong_square");
}

TEST(Gradcheck, FailsOnADeliberatelyWrongBackward) {
  const Tensor x = normal({2, 3}, 1);
  const GradcheckResult r = gradcheck([](const Vars& v) { return wrong_square(v[0]); }, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_GT(r.max_abs_err, 0.1);
  EXPECT_NEAR(r.max_rel_err, 0.5, 1e-6);  // analytic x vs numeric 2x
  EXPECT_NE(r.message.find("MISMATCH"), std::string::npos) << r.message;
  // The error |x| relative to the tolerance grows with |x|: the worst entry is
  // the largest |x|, on the Jacobian's diagonal, named by its index.
  const std::vector<double> values = x.to_vector();
  int64_t largest = 0;
  for (int64_t i = 1; i < 6; ++i)
    if (std::abs(values[static_cast<std::size_t>(i)]) > std::abs(values[static_cast<std::size_t>(largest)])) largest = i;
  const std::string at = "[" + std::to_string(largest / 3) + ", " + std::to_string(largest % 3) + "]";
  EXPECT_NE(r.message.find("worst at input 0 element " + at + ", output element " + at), std::string::npos)
      << r.message;
}

TEST(Gradcheck, FailsOnAWrongBackwardInProjectionMode) {
  GradcheckOptions opt;
  opt.max_full_outputs = 0;  // force random projections
  const GradcheckResult r = gradcheck([](const Vars& x) { return wrong_square(x[0]); }, {normal({4, 5}, 2)}, opt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("random projection"), std::string::npos) << r.message;
}

TEST(Gradcheck, FailsWhenAGradientIsMissing) {
  // Uses x[1] in the forward but its backward never reaches it.
  auto f = [](const Vars& x) { return x[0] * Variable(x[1].value()); };
  const GradcheckResult r = gradcheck(f, {normal({3}, 3), normal({3}, 4)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 1"), std::string::npos) << r.message;
}

TEST(Gradcheck, PassesLargeOutputsThroughProjections) {
  const GradcheckResult r = gradcheck([](const Vars& x) { return tanh(matmul(x[0], x[1])); },
                                      {normal({20, 6}, 5), normal({6, 20}, 6)});  // 400 outputs > 256
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NE(r.message.find("random projections"), std::string::npos) << r.message;
}

TEST(Gradcheck, RejectsFloat32Inputs) {
  EXPECT_THROW(gradcheck([](const Vars& x) { return x[0]; }, {Tensor::ones({2}, DType::f32)}),
               std::invalid_argument);
}

TEST(Gradcheck, LeavesTheCallersInputsUntouched) {
  const Tensor x = normal({3}, 7);
  const std::vector<double> before = x.to_vector();
  gradcheck([](const Vars& v) { return exp(v[0]); }, {x});
  EXPECT_EQ(x.to_vector(), before);
}

// --- tricky cases, spelled out ---

TEST(GradcheckOps, BroadcastBothWaysInOneProduct) {
  // [2,1,4] * [3,1]: each operand broadcasts along an axis of the other.
  const GradcheckResult r = gradcheck([](const Vars& x) { return exp(x[0] * x[1]); },
                                      {normal({2, 1, 4}, 8), normal({3, 1}, 9)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GradcheckOps, SoftmaxBackwardThroughATransposedView) {
  const GradcheckResult r =
      gradcheck([](const Vars& x) { return sum(softmax(transpose(x[0], 0, 2), 1) * x[1], {0, 2}); },
                {normal({4, 3, 2}, 10), normal({2, 3, 4}, 11)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GradcheckOps, CrossEntropyWithLargeLogitsInFloat64) {
  // Logits around 1e3 overflow a naive exp; the fused kernel subtracts the max.
  Tensor logits = normal({3, 4}, 12);
  logits.copy_(core::add(logits, 1000.0));
  const GradcheckResult r = gradcheck(
      [](const Vars& x) { return cross_entropy(x[0], std::vector<int32_t>{3, -1, 0}); }, {logits});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GradcheckOps, LayerNormOfAStridedSliceWithBroadcastReadout) {
  const GradcheckResult r = gradcheck(
      [](const Vars& x) { return layer_norm(slice(x[0], 1, 0, 8, 2), x[1], x[2]) * x[3]; },
      {normal({3, 8}, 13), normal({4}, 14), normal({4}, 15), normal({1, 4}, 16)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GradcheckOps, TwoLayerMlpWithSharedWeightMatmul) {
  const GradcheckResult r = gradcheck(
      [](const Vars& x) {
        Variable h = gelu(matmul(x[0], transpose(x[1], 0, 1)) + x[2]);
        return cross_entropy(matmul(h, x[3]), std::vector<int32_t>{0, 2, -1, 1, 2, 0});
      },
      {normal({2, 3, 4}, 17), normal({5, 4}, 18), normal({5}, 19), normal({5, 3}, 20)});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace headlab::autograd

// Elementwise ops: exact values, broadcasting and its errors, strided inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/ops.h"
#include "core/random.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

Tensor vec(std::vector<double> v, DType dtype = DType::f64) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n}, dtype);
}

TEST(Unary, ExactValues) {
  const Tensor x = vec({-2, -0.5, 0, 1, 4});
  EXPECT_EQ(neg(x).to_vector(), (std::vector<double>{2, 0.5, 0, -1, -4}));
  EXPECT_EQ(relu(x).to_vector(), (std::vector<double>{0, 0, 0, 1, 4}));
  EXPECT_EQ(abs(x).to_vector(), (std::vector<double>{2, 0.5, 0, 1, 4}));
  EXPECT_EQ(sign(x).to_vector(), (std::vector<double>{-1, -1, 0, 1, 1}));
  EXPECT_EQ(pow(x, 2).to_vector(), (std::vector<double>{4, 0.25, 0, 1, 16}));
  const Tensor p = vec({0.25, 1, 4});
  EXPECT_EQ(sqrt(p).to_vector(), (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(log(vec({1})).item(), 0);
  EXPECT_EQ(exp(vec({0})).item(), 1);
  EXPECT_DOUBLE_EQ(exp(vec({1})).item(), std::exp(1.0));
  EXPECT_DOUBLE_EQ(tanh(vec({0.3})).item(), std::tanh(0.3));
  EXPECT_DOUBLE_EQ(erf(vec({0.3})).item(), std::erf(0.3));
  EXPECT_DOUBLE_EQ(sigmoid(vec({0})).item(), 0.5);
}

TEST(Binary, ExactValues) {
  const Tensor a = vec({1, 2, 3, 4}), b = vec({4, 2, 1, 8});
  EXPECT_EQ(add(a, b).to_vector(), (std::vector<double>{5, 4, 4, 12}));
  EXPECT_EQ(sub(a, b).to_vector(), (std::vector<double>{-3, 0, 2, -4}));
  EXPECT_EQ(mul(a, b).to_vector(), (std::vector<double>{4, 4, 3, 32}));
  EXPECT_EQ(div(a, b).to_vector(), (std::vector<double>{0.25, 1, 3, 0.5}));
  EXPECT_EQ(pow(a, vec({2, 3, 0, 0.5})).to_vector(), (std::vector<double>{1, 8, 1, 2}));
  EXPECT_EQ(maximum(a, b).to_vector(), (std::vector<double>{4, 2, 3, 8}));
  EXPECT_EQ(minimum(a, b).to_vector(), (std::vector<double>{1, 2, 1, 4}));
  EXPECT_EQ(eq(a, b).to_vector(), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(ne(a, b).to_vector(), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(lt(a, b).to_vector(), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(le(a, b).to_vector(), (std::vector<double>{1, 1, 0, 1}));
  EXPECT_EQ(gt(a, b).to_vector(), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(ge(a, b).to_vector(), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(add(a, 1.5).to_vector(), (std::vector<double>{2.5, 3.5, 4.5, 5.5}));
  EXPECT_EQ((a * 2.0).to_vector(), (std::vector<double>{2, 4, 6, 8}));
}

TEST(Binary, MaximumPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(maximum(vec({nan}), vec({1})).item()));
  EXPECT_TRUE(std::isnan(maximum(vec({1}), vec({nan})).item()));
}

TEST(Where, SelectsByCondition) {
  const Tensor c = vec({1, 0, 1});
  EXPECT_EQ(where(c, vec({1, 2, 3}), vec({-1})).to_vector(), (std::vector<double>{1, -1, 3}));
}

TEST(Broadcast, ShapesCombineNumpyStyle) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {3}, "t"), (Shape{3}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 5}, "t"), (Shape{0, 5}));
}

TEST(Broadcast, ValuesRepeatAlongSizeOneAxes) {
  const Tensor col = Tensor::from_vector({10, 20}, {2, 1}, DType::f64);
  const Tensor row = Tensor::from_vector({1, 2, 3}, {3}, DType::f64);
  const Tensor s = add(col, row);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.to_vector(), (std::vector<double>{11, 12, 13, 21, 22, 23}));
}

TEST(Broadcast, MismatchNamesOpAndShapes) {
  try {
    (void)mul(Tensor::zeros({2, 3}), Tensor::zeros({4}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mul"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
}

TEST(Binary, DtypeMismatchIsAnError) {
  EXPECT_THROW(add(Tensor::zeros({2}, DType::f32), Tensor::zeros({2}, DType::f64)), std::invalid_argument);
}

TEST(Binary, UndefinedTensorIsAnError) { EXPECT_THROW(add(Tensor(), Tensor::zeros({1})), std::invalid_argument); }

TEST(Elementwise, ZeroSizeTensorsGiveZeroSizeResults) {
  const Tensor z = Tensor::zeros({0, 3});
  EXPECT_EQ(add(z, Tensor::ones({3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(exp(z).numel(), 0);
}

// Every op gives the same values on a strided view as on its contiguous copy.
TEST(Elementwise, NonContiguousInputsMatchContiguous) {
  Generator gen(1);
  const Tensor base = gen.uniform({4, 5, 6}, 0.5, 2.0, DType::f64);
  const Tensor view = base.permute({2, 0, 1}).slice(0, 0, 6, 2);  // strided, non-contiguous
  const Tensor copy = view.contiguous();
  ASSERT_FALSE(view.is_contiguous());
  const std::vector<std::function<Tensor(const Tensor&)>> unary = {
      [](const Tensor& x) { return neg(x); },    [](const Tensor& x) { return exp(x); },
      [](const Tensor& x) { return log(x); },    [](const Tensor& x) { return sqrt(x); },
      [](const Tensor& x) { return tanh(x); },   [](const Tensor& x) { return erf(x); },
      [](const Tensor& x) { return relu(x); },   [](const Tensor& x) { return sigmoid(x); },
      [](const Tensor& x) { return pow(x, 3); }, [](const Tensor& x) { return abs(x); },
      [](const Tensor& x) { return x + x; },     [](const Tensor& x) { return x / (x + 1.0); },
      [](const Tensor& x) { return maximum(x, x * 0.5); },
      [](const Tensor& x) { return where(gt(x, Tensor::scalar(1, DType::f64)), x, -x); },
  };
  for (std::size_t i = 0; i < unary.size(); ++i)
    EXPECT_EQ(unary[i](view).to_vector(), unary[i](copy).to_vector()) << "op " << i;
}

// Large enough to run on several threads; the result must not depend on it.
TEST(Elementwise, ResultsDoNotDependOnThreadCount) {
  Generator gen(2);
  const Tensor a = gen.normal({300, 257}, 0, 1), b = gen.normal({257}, 0, 1);
  set_num_threads(1);
  const std::vector<double> one = (exp(a) * b + a).to_vector();
  set_num_threads(2);
  const std::vector<double> two = (exp(a) * b + a).to_vector();
  set_num_threads(0);
  EXPECT_EQ(one, two);
}

TEST(Elementwise, F32MatchesF64WithinRounding) {
  Generator gen(3);
  const Tensor x = gen.normal({50}, 0, 1, DType::f64);
  EXPECT_LT(max_abs_diff(tanh(x.to(DType::f32)).to(DType::f64), tanh(x)), 1e-6);
}

}  // namespace
}  // namespace headlab::core

// Tensor layout: creation, views sharing storage, contiguity, copies, errors.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/ops.h"

namespace headlab::core {
namespace {

Tensor iota(const Shape& shape, DType dtype = DType::f64) { return Tensor::arange(numel_of(shape), dtype).reshape(shape); }

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    const Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u) << n;
  }
}

TEST(Tensor, CreationFillsValues) {
  EXPECT_EQ(Tensor::zeros({2, 3}).to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(Tensor::ones({2}, DType::f64).to_vector(), std::vector<double>(2, 1.0));
  EXPECT_EQ(Tensor::full({3}, 2.5).to_vector(), std::vector<double>(3, 2.5));
  EXPECT_EQ(Tensor::arange(4).to_vector(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::scalar(7).dim(), 0);
  EXPECT_EQ(Tensor::scalar(7).item(), 7);
  EXPECT_EQ(Tensor::from_vector({1, 2, 3, 4}, {2, 2}).at({1, 0}), 3);
}

TEST(Tensor, FromVectorRejectsWrongCount) {
  EXPECT_THROW(Tensor::from_vector({1, 2, 3}, {2, 2}), std::invalid_argument);
}

TEST(Tensor, TransposeIsAViewSharingStorage) {
  Tensor t = iota({2, 3});
  Tensor tt = t.transpose(0, 1);
  EXPECT_TRUE(tt.shares_storage(t));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.at({2, 1}), 5);
  tt.set({0, 1}, 42);
  EXPECT_EQ(t.at({1, 0}), 42);  // written through the view
}

TEST(Tensor, PermuteReordersAxes) {
  const Tensor t = iota({2, 3, 4});
  const Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.at({3, 1, 2}), t.at({1, 2, 3}));
  EXPECT_THROW(t.permute({0, 0, 1}), std::invalid_argument);
  EXPECT_THROW(t.permute({0, 1}), std::invalid_argument);
}

TEST(Tensor, SliceWithStepIsAView) {
  const Tensor t = iota({10});
  const Tensor s = t.slice(0, 1, 8, 3);
  EXPECT_TRUE(s.shares_storage(t));
  EXPECT_EQ(s.to_vector(), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(t.slice(0, -3, 10).to_vector(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(t.slice(0, 5, 2).numel(), 0);
  EXPECT_THROW(t.slice(0, 0, 5, 0), std::invalid_argument);
}

TEST(Tensor, SelectDropsTheAxis) {
  const Tensor t = iota({3, 4});
  EXPECT_EQ(t.select(0, 2).to_vector(), (std::vector<double>{8, 9, 10, 11}));
  EXPECT_EQ(t.select(1, -1).to_vector(), (std::vector<double>{3, 7, 11}));
  EXPECT_THROW(t.select(0, 3), std::invalid_argument);
}

TEST(Tensor, ReshapeViewsWhenStridesAllowAndCopiesOtherwise) {
  const Tensor t = iota({2, 3, 4});
  const Tensor r = t.reshape({6, 4});
  EXPECT_TRUE(r.shares_storage(t));
  EXPECT_EQ(t.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(t.reshape({4, -1}).shape(), (Shape{4, 6}));
  // A transposed view cannot be flattened without a copy.
  const Tensor tt = t.transpose(1, 2);
  EXPECT_THROW(tt.view({24}), std::invalid_argument);
  const Tensor flat = tt.reshape({24});
  EXPECT_FALSE(flat.shares_storage(t));
  EXPECT_EQ(flat.at({1}), 4);  // tt[0][0][1] = t[0][1][0]
  // Merging the untouched leading axis of a permuted view is still a view.
  EXPECT_TRUE(t.permute({0, 2, 1}).reshape({2, 4, 3}).shares_storage(t));
}

TEST(Tensor, ReshapeRejectsIncompatibleSizes) {
  const Tensor t = iota({2, 3});
  try {
    (void)t.reshape({4, 2});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.reshape({-1, -1}), std::invalid_argument);
  EXPECT_THROW(t.reshape({-1, 4}), std::invalid_argument);
}

TEST(Tensor, ExpandUsesZeroStrides) {
  const Tensor t = Tensor::from_vector({1, 2, 3}, {3, 1}, DType::f64);
  const Tensor e = t.expand({2, 3, 4});
  EXPECT_EQ(e.strides()[0], 0);
  EXPECT_EQ(e.strides()[2], 0);
  EXPECT_EQ(e.at({1, 2, 3}), 3);
  EXPECT_THROW(t.expand({2, 2}), std::invalid_argument);
  EXPECT_THROW(t.expand({4}), std::invalid_argument);
}

TEST(Tensor, SqueezeAndUnsqueeze) {
  const Tensor t = iota({2, 3});
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3}));
  EXPECT_THROW(t.squeeze(0), std::invalid_argument);
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  const Tensor t = iota({3, 4});
  EXPECT_TRUE(t.contiguous().shares_storage(t));
  const Tensor c = t.transpose(0, 1).contiguous();
  EXPECT_FALSE(c.shares_storage(t));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector(), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(Tensor, CopyBroadcastsAndConvertsDtype) {
  Tensor dst = Tensor::zeros({2, 3}, DType::f32);
  dst.copy_(Tensor::from_vector({1.5, 2.5, 3.5}, {3}, DType::f64));
  EXPECT_EQ(dst.to_vector(), (std::vector<double>{1.5, 2.5, 3.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(iota({2}, DType::f64).to(DType::f32).dtype(), DType::f32);
}

TEST(Tensor, CopyOntoOverlappingViewOfItself) {
  Tensor t = iota({5});
  t.slice(0, 1, 5).copy_(t.slice(0, 0, 4));
  EXPECT_EQ(t.to_vector(), (std::vector<double>{0, 0, 1, 2, 3}));
}

TEST(Tensor, FillWritesThroughStridedView) {
  Tensor t = Tensor::zeros({3, 3}, DType::f64);
  t.transpose(0, 1).select(0, 1).fill_(9);  // column 1
  EXPECT_EQ(t.to_vector(), (std::vector<double>{0, 9, 0, 0, 9, 0, 0, 9, 0}));
}

TEST(Tensor, AxisOutOfRangeNamesTheOp) {
  const Tensor t = iota({2, 3});
  try {
    (void)t.transpose(0, 2);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("transpose"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("axis 2"), std::string::npos);
  }
}

TEST(Tensor, DataChecksDtype) {
  const Tensor t = Tensor::zeros({2}, DType::f32);
  EXPECT_NO_THROW((void)t.data<float>());
  EXPECT_THROW((void)t.data<double>(), std::invalid_argument);
}

TEST(Tensor, ItemNeedsOneElement) {
  EXPECT_THROW((void)Tensor::zeros({2}).item(), std::invalid_argument);
  EXPECT_EQ(Tensor::full({1, 1}, 3).item(), 3);
}

TEST(Tensor, PrintsValuesShapeAndDtype) {
  const std::string s = Tensor::from_vector({1, 2, 3, 4}, {2, 2}).to_string();
  EXPECT_NE(s.find("[[1, 2],"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=[2, 2]"), std::string::npos) << s;
  EXPECT_NE(s.find("f32"), std::string::npos) << s;
  EXPECT_NE(Tensor::arange(100).to_string().find("..."), std::string::npos);
}

// Each element's unravelled index reads it back from a tensor holding its
// own flat index; one past the end, or before the start, is an error that
// names the index and the shape.
TEST(Tensor, UnravelIndexInvertsRowMajorOrder) {
  for (const Shape& shape : {Shape{7}, Shape{2, 3}, Shape{3, 1, 4}, Shape{2, 3, 4, 5}}) {
    const Tensor t = iota(shape);
    for (int64_t flat = 0; flat < t.numel(); ++flat) {
      const Shape index = unravel_index(flat, shape);
      ASSERT_EQ(index.size(), shape.size()) << to_string(shape);
      EXPECT_EQ(t.at(index), static_cast<double>(flat)) << to_string(shape) << " element " << flat;
    }
  }
  EXPECT_EQ(unravel_index(5, {2, 3}), (Shape{1, 2}));
  EXPECT_EQ(unravel_index(0, {}), Shape{});  // a scalar's one element
  try {
    unravel_index(6, {2, 3});
    FAIL() << "element 6 of a [2, 3] was unravelled";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("element 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(unravel_index(-1, {2, 3}), std::out_of_range);
  EXPECT_THROW(unravel_index(0, {2, 0}), std::out_of_range);  // no elements at all
}

TEST(Tensor, NegativeShapeIsRejected) { EXPECT_THROW(Tensor::empty({2, -3}), std::invalid_argument); }

}  // namespace
}  // namespace headlab::core

// The padding mask built from row lengths (layers/padding_mask.h).
#include "layers/padding_mask.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace headlab::layers {
namespace {

TEST(PaddingMask, MarksEachRowsRealPositions) {
  const core::Tensor m = padding_mask(std::vector<int32_t>{2, 4, 1}, 3, 4);
  ASSERT_TRUE(m.defined());
  EXPECT_EQ(m.shape(), (core::Shape{3, 4}));
  EXPECT_EQ(m.to_vector(), (std::vector<double>{1, 1, 0, 0, /**/ 1, 1, 1, 1, /**/ 1, 0, 0, 0}));
}

// No padding, no mask: the forward then runs exactly as without one.
TEST(PaddingMask, IsUndefinedWithoutLengthsOrWhenEveryRowIsFull) {
  EXPECT_FALSE(padding_mask({}, 3, 4).defined());
  EXPECT_FALSE(padding_mask(std::vector<int32_t>{4, 4}, 2, 4).defined());
}

TEST(PaddingMask, RejectsLengthsThatDoNotFitTheBatch) {
  EXPECT_THROW(padding_mask(std::vector<int32_t>{2}, 2, 4), std::invalid_argument);
  EXPECT_THROW(padding_mask(std::vector<int32_t>{0, 2}, 2, 4), std::invalid_argument);
  EXPECT_THROW(padding_mask(std::vector<int32_t>{5, 2}, 2, 4), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::layers

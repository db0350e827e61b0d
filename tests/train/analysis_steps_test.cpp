// The steps that analyze the heads: every --analyze-every, and log-spaced
// before the first of those.
#include "train/analysis_steps.h"

#include <gtest/gtest.h>

#include <vector>

namespace headlab::train {
namespace {

std::vector<int64_t> steps_up_to(int64_t last, int64_t every) {
  std::vector<int64_t> out;
  for (int64_t s = 1; s <= last; ++s)
    if (is_analysis_step(s, every)) out.push_back(s);
  return out;
}

TEST(AnalysisSteps, LogSpacedBeforeTheFirstInterval) {
  EXPECT_EQ(steps_up_to(600, 100), (std::vector<int64_t>{10, 20, 50, 100, 200, 300, 400, 500, 600}));
  EXPECT_EQ(steps_up_to(3000, 1000), (std::vector<int64_t>{10, 20, 50, 100, 200, 500, 1000, 2000, 3000}));
}

TEST(AnalysisSteps, ShortIntervalsAreUnchanged) {
  EXPECT_EQ(steps_up_to(10, 3), (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(steps_up_to(30, 10), (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(steps_up_to(50, 20), (std::vector<int64_t>{10, 20, 40}));
}

TEST(AnalysisSteps, ZeroMeansOnlyAtTheEnd) {
  EXPECT_TRUE(steps_up_to(1000, 0).empty());
  EXPECT_FALSE(is_analysis_step(0, 100));
}

}  // namespace
}  // namespace headlab::train

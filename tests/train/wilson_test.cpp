// The Wilson score interval against published values: Newcombe (1998),
// "Two-sided confidence intervals for the single proportion", Statistics in
// Medicine 17, Table I, method 3 (score interval without continuity correction).
#include "train/wilson.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace headlab::train {
namespace {

void expect_interval(int64_t k, int64_t n, double lo, double hi) {
  const Interval ci = wilson_interval(k, n);
  EXPECT_NEAR(ci.lo, lo, 5e-5) << k << " of " << n;
  EXPECT_NEAR(ci.hi, hi, 5e-5) << k << " of " << n;
}

TEST(WilsonInterval, MatchesNewcombesTable) {
  expect_interval(81, 263, 0.2553, 0.3662);
  expect_interval(15, 148, 0.0624, 0.1605);
  expect_interval(0, 20, 0.0, 0.1611);
  expect_interval(1, 29, 0.0061, 0.1718);
}

TEST(WilsonInterval, MatchesTheFormulaAtSweepSizes) {
  expect_interval(5, 10, 0.2366, 0.7634);
  expect_interval(7, 10, 0.3968, 0.8922);
  expect_interval(0, 10, 0.0, 0.2775);
  expect_interval(10, 10, 0.7225, 1.0);
}

TEST(WilsonInterval, EndsAreExactAndTheIntervalHoldsTheRate) {
  for (int64_t n = 1; n <= 30; ++n) {
    EXPECT_EQ(wilson_interval(0, n).lo, 0.0);
    EXPECT_EQ(wilson_interval(n, n).hi, 1.0);
    for (int64_t k = 0; k <= n; ++k) {
      const Interval ci = wilson_interval(k, n);
      const double p = static_cast<double>(k) / static_cast<double>(n);
      EXPECT_LE(ci.lo, p);
      EXPECT_GE(ci.hi, p);
      EXPECT_GT(ci.hi - ci.lo, 0.0) << "never a point";
      // Symmetric: k of n mirrors n - k of n.
      const Interval mirror = wilson_interval(n - k, n);
      EXPECT_NEAR(ci.lo, 1 - mirror.hi, 1e-12);
    }
  }
}

TEST(WilsonInterval, NarrowsWithMoreTrialsAndWidensWithZ) {
  const Interval ten = wilson_interval(5, 10), hundred = wilson_interval(50, 100);
  EXPECT_LT(hundred.hi - hundred.lo, ten.hi - ten.lo);
  const Interval z99 = wilson_interval(5, 10, 2.5758293035489);
  EXPECT_LT(z99.lo, ten.lo);
  EXPECT_GT(z99.hi, ten.hi);
}

TEST(WilsonInterval, WithoutTrialsNothingIsKnown) {
  const Interval ci = wilson_interval(0, 0);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_EQ(ci.hi, 1.0);
}

TEST(WilsonInterval, RejectsImpossibleCounts) {
  EXPECT_THROW((void)wilson_interval(3, 2), std::invalid_argument);
  EXPECT_THROW((void)wilson_interval(-1, 2), std::invalid_argument);
  EXPECT_THROW((void)wilson_interval(0, -1), std::invalid_argument);
  EXPECT_THROW((void)wilson_interval(1, 2, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::train

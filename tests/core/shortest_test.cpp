// core::shortest: the shortest text that reads back as the same double.
#include "core/shortest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace headlab::core {
namespace {

TEST(Shortest, SmallAndRoundValuesPrintWithoutPadding) {
  EXPECT_EQ(shortest(0.0), "0");
  EXPECT_EQ(shortest(1e-3), "0.001");
  EXPECT_EQ(shortest(1e-7), "1e-07");
  EXPECT_EQ(shortest(600.0), "600");
  EXPECT_EQ(shortest(-2.5), "-2.5");
  EXPECT_EQ(shortest(INFINITY), "inf");
  EXPECT_EQ(shortest(NAN), "nan");
}

TEST(Shortest, EveryValueReadsBackExactly) {
  for (const double v : {0.1, 1.0 / 3.0, 3e-4, 123456.789, 2.2250738585072014e-308, 1e300, -7.000000000000001})
    EXPECT_EQ(std::stod(shortest(v)), v) << shortest(v);
}

}  // namespace
}  // namespace headlab::core

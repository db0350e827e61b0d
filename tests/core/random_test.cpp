// The generator: reproducible streams, ranges, moments, state round trip.
#include "core/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/ops.h"
#include "core/threads.h"

namespace headlab::core {
namespace {

TEST(Generator, SameSeedSameStream) {
  Generator a(42), b(42), c(43);
  std::vector<uint64_t> xa, xb, xc;
  for (int i = 0; i < 100; ++i) {
    xa.push_back(a.next_u64());
    xb.push_back(b.next_u64());
    xc.push_back(c.next_u64());
  }
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
}

TEST(Generator, StreamDoesNotDependOnThreadCount) {
  set_num_threads(1);
  const auto one = Generator(5).normal({1000}, 0, 1).to_vector();
  set_num_threads(2);
  const auto two = Generator(5).normal({1000}, 0, 1).to_vector();
  set_num_threads(0);
  EXPECT_EQ(one, two);
}

TEST(Generator, UniformStaysInRange) {
  Generator g(1);
  const Tensor u = g.uniform({10000}, -2, 3, DType::f64);
  EXPECT_GE(-max(neg(u)).item(), -2);
  EXPECT_LT(max(u).item(), 3);
  EXPECT_NEAR(mean(u).item(), 0.5, 0.05);
}

TEST(Generator, NormalHasTheRequestedMoments) {
  Generator g(2);
  const Tensor x = g.normal({20000}, 1.5, 2.0, DType::f64);
  const double m = mean(x).item();
  const double var = mean(pow(x + (-m), 2)).item();
  EXPECT_NEAR(m, 1.5, 0.05);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.05);
}

TEST(Generator, IntegersCoverTheRangeAndNothingElse) {
  Generator g(3);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = g.integer(-3, 4);
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_THROW(g.integer(2, 2), std::invalid_argument);
}

TEST(Generator, StateRoundTripContinuesTheStream) {
  Generator g(9);
  (void)g.normal();  // leaves a cached spare normal in the state
  const Generator::State s = g.state();
  const double n1 = g.normal(), n2 = g.normal();
  const uint64_t u = g.next_u64();
  Generator h(0);
  h.set_state(s);
  EXPECT_EQ(h.normal(), n1);
  EXPECT_EQ(h.normal(), n2);
  EXPECT_EQ(h.next_u64(), u);
  EXPECT_THROW(h.set_state(Generator::State{}), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::core

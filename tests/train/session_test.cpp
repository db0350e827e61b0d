// Training sessions end to end: learning the demo task, exact resume,
// determinism, non-finite losses.
#include "train/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/ops.h"
#include "tests/train/test_util.h"
#include "train/errors.h"

namespace headlab::train {
namespace {

TrainConfig small_demo() {
  TrainConfig c;  // first-prev-pair, V 8, T 6, 1 layer, 2 heads
  c.model.d_model = 32;
  c.batch = 64;
  c.eval_batch = 256;
  c.lr = 3e-3;
  c.seed = 1;
  return c;
}

using test::flat_weights;

TEST(Session, LearnsTheDemoTask) {
  Session s(small_demo());
  for (int i = 0; i < 400; ++i) s.step();
  const EvalResult r = evaluate(s.model(), s.eval_batch());
  EXPECT_GE(r.accuracy, 0.99) << "loss " << r.loss;
}

TEST(Session, ResumeEqualsUninterruptedRunBitForBit) {
  const auto path = (std::filesystem::temp_directory_path() / ("headlab-resume-" + std::to_string(::getpid()))).string();
  TrainConfig c = small_demo();
  Session straight(c);
  std::vector<double> losses;
  for (int i = 0; i < 12; ++i) losses.push_back(straight.step().loss);

  Session first(c);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(first.step().loss, losses[static_cast<std::size_t>(i)]);
  first.save(path);
  Session resumed(read_checkpoint(path));
  std::filesystem::remove(path);
  EXPECT_EQ(resumed.steps_done(), 5);
  for (int i = 5; i < 12; ++i) EXPECT_EQ(resumed.step().loss, losses[static_cast<std::size_t>(i)]) << "step " << i;
  EXPECT_EQ(flat_weights(resumed.model()), flat_weights(straight.model()));
}

TEST(Session, SameSeedSameNumbersOtherSeedOtherNumbers) {
  TrainConfig c = small_demo();
  Session a(c), b(c);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.step().loss, b.step().loss);
  c.seed = 2;
  Session other(c);
  EXPECT_NE(other.step().loss, Session(small_demo()).step().loss);
}

TEST(Session, NonFiniteLossStopsNamingTheStepAndLeavesTheModel) {
  TrainConfig c = small_demo();
  c.lr = 1e30;  // absurd: the first update overflows the weights
  c.clip = 0;
  Session s(c);
  std::vector<double> before;
  try {
    for (int i = 0; i < 5; ++i) {
      before = flat_weights(s.model());
      (void)s.step();
    }
    FAIL() << "expected a non-finite loss";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("at step " + std::to_string(s.steps_done() + 1)), std::string::npos)
        << e.what();
  }
  // The failed step did not touch the weights (they may be huge, but not NaN from it).
  const auto after = flat_weights(s.model());
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (!std::isnan(before[i])) {
      EXPECT_EQ(after[i], before[i]);
    }
  }
}

TEST(Session, BadTaskSettingsAreUsageErrors) {
  TrainConfig c = small_demo();
  c.task = "no-such-task";
  EXPECT_THROW(Session{c}, UsageError);
  c = small_demo();
  c.model.heads = 3;  // 32 is not divisible by 3
  EXPECT_THROW(Session{c}, UsageError);
}

}  // namespace
}  // namespace headlab::train

#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace headlab::optim {
namespace {

TEST(Schedule, ConstantStaysAtBase) {
  const Schedule s(ScheduleOptions{}.set_kind(ScheduleKind::constant).set_base_lr(0.1));
  EXPECT_EQ(s.lr_at(0), 0.1);
  EXPECT_EQ(s.lr_at(1000000), 0.1);
}

TEST(Schedule, WarmupRisesLinearlyToBaseAtItsLastStep) {
  const Schedule s(ScheduleOptions{}.set_base_lr(0.1).set_warmup_steps(4));
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.025);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 0.075);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(50), 0.1);
}

TEST(Schedule, CosineDecaysFromBaseToFloorAtTotalSteps) {
  const Schedule s(ScheduleOptions{}
                       .set_kind(ScheduleKind::cosine)
                       .set_base_lr(1.0)
                       .set_min_lr(0.1)
                       .set_warmup_steps(10)
                       .set_total_steps(110));
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.5);  // warmup: 1.0 * 5 / 10
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(35), 0.1 + 0.9 * 0.5 * (1.0 + std::cos(std::numbers::pi / 4.0)));
  EXPECT_NEAR(s.lr_at(60), 0.55, 1e-15);  // half way: the middle of base and floor
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(500), 0.1);
}

TEST(Schedule, LinearDecaysToFloorAtTotalSteps) {
  const Schedule s(ScheduleOptions{}.set_kind(ScheduleKind::linear).set_base_lr(1.0).set_total_steps(100));
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(25), 0.75);
  EXPECT_DOUBLE_EQ(s.lr_at(100), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_at(150), 0.0);
  const Schedule floored(ScheduleOptions{}
                             .set_kind(ScheduleKind::linear)
                             .set_base_lr(1.0)
                             .set_min_lr(0.2)
                             .set_warmup_steps(20)
                             .set_total_steps(60));
  EXPECT_DOUBLE_EQ(floored.lr_at(40), 0.6);
  EXPECT_DOUBLE_EQ(floored.lr_at(70), 0.2);
}

TEST(Schedule, StepDecaysByGammaEveryStepSizeDownToFloor) {
  const Schedule s(
      ScheduleOptions{}.set_kind(ScheduleKind::step).set_base_lr(1.0).set_step_size(10).set_gamma(0.5).set_min_lr(0.1));
  EXPECT_EQ(s.lr_at(0), 1.0);
  EXPECT_EQ(s.lr_at(9), 1.0);
  EXPECT_EQ(s.lr_at(10), 0.5);
  EXPECT_EQ(s.lr_at(25), 0.25);
  EXPECT_EQ(s.lr_at(35), 0.125);
  EXPECT_EQ(s.lr_at(45), 0.1);  // 0.0625 is below the floor
}

TEST(Schedule, StepCountsItsDecaysFromTheEndOfWarmup) {
  const Schedule s(ScheduleOptions{}
                       .set_kind(ScheduleKind::step)
                       .set_base_lr(1.0)
                       .set_warmup_steps(5)
                       .set_step_size(10)
                       .set_gamma(0.1));
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.2);
  EXPECT_EQ(s.lr_at(14), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(15), 0.1);
}

TEST(Schedule, ParsesKnownNames) {
  EXPECT_EQ(parse_schedule_kind("constant"), ScheduleKind::constant);
  EXPECT_EQ(parse_schedule_kind("cosine"), ScheduleKind::cosine);
  EXPECT_EQ(parse_schedule_kind("linear"), ScheduleKind::linear);
  EXPECT_EQ(parse_schedule_kind("step"), ScheduleKind::step);
  EXPECT_EQ(to_string(ScheduleKind::cosine), "cosine");
}

TEST(Schedule, UnknownNameErrorListsValidNames) {
  try {
    parse_schedule_kind("cosin");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'cosin'"), std::string::npos) << what;
    EXPECT_NE(what.find("constant, cosine, linear, step"), std::string::npos) << what;
  }
}

TEST(Schedule, InconsistentOptionsAreRejected) {
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_base_lr(-1.0)), std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_base_lr(0.1).set_min_lr(0.2)), std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_warmup_steps(-1)), std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_kind(ScheduleKind::cosine).set_warmup_steps(10).set_total_steps(5)),
               std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_kind(ScheduleKind::step).set_step_size(0)), std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}.set_kind(ScheduleKind::step).set_gamma(0.0)), std::invalid_argument);
  EXPECT_THROW(Schedule(ScheduleOptions{}).lr_at(-1), std::invalid_argument);
}

}  // namespace
}  // namespace headlab::optim

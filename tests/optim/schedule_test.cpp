// Learning-rate schedules at the points where their formulas give round numbers.
#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/error.h"
#include "support/errors.h"

namespace tf::optim {
namespace {

// Peak 1, floor 0.1, warmup 10 steps, floor reached at step 110: decay spans 100 steps.
ScheduleOptions options(ScheduleKind kind) {
  return {.kind = kind, .lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .decay_steps = 110};
}

TEST(Schedule, WarmupRisesLinearlyFromLrOverWToLr) {
  for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::cosine, ScheduleKind::linear, ScheduleKind::wsd}) {
    const Schedule s(options(kind));
    EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1) << schedule_kind_name(kind);  // 1 * (0 + 1) / 10
    EXPECT_DOUBLE_EQ(s.lr_at(4), 0.5) << schedule_kind_name(kind);
    EXPECT_DOUBLE_EQ(s.lr_at(9), 1.0) << schedule_kind_name(kind);  // end of warmup: the peak
    EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0) << schedule_kind_name(kind);  // start of decay: still the peak
  }
}

TEST(Schedule, CosineDecay) {
  const Schedule s(options(ScheduleKind::cosine));
  EXPECT_DOUBLE_EQ(s.lr_at(60), 0.55);  // midpoint: cos(pi/2) = 0, floor + (peak - floor) / 2
  EXPECT_NEAR(s.lr_at(35), 0.1 + 0.9 * (1 + std::sqrt(0.5)) / 2, 1e-15);  // quarter: cos(pi/4)
  EXPECT_NEAR(s.lr_at(85), 0.1 + 0.9 * (1 - std::sqrt(0.5)) / 2, 1e-15);  // three quarters
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);  // the floor
  EXPECT_DOUBLE_EQ(s.lr_at(100000), 0.1);
  for (int64_t t = 10; t < 110; ++t) EXPECT_LT(s.lr_at(t + 1), s.lr_at(t)) << "not decreasing at " << t;
}

TEST(Schedule, LinearDecay) {
  const Schedule s(options(ScheduleKind::linear));
  EXPECT_DOUBLE_EQ(s.lr_at(60), 0.55);
  EXPECT_DOUBLE_EQ(s.lr_at(35), 0.1 + 0.9 * 0.75);
  EXPECT_NEAR(s.lr_at(109), 0.1 + 0.9 * 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(5000), 0.1);
}

// Warmup-stable-decay: with 100 steps after warmup and a cooldown of 0.3, the rate holds the peak to
// step 79 and falls linearly over the last 30 steps (C = 110 - 30 = 80) to the floor.
TEST(Schedule, WarmupStableDecay) {
  ScheduleOptions o = options(ScheduleKind::wsd);
  o.cooldown_fraction = 0.3;
  const Schedule s(o);
  for (int64_t t = 10; t < 80; ++t) EXPECT_EQ(s.lr_at(t), 1.0) << t;
  EXPECT_DOUBLE_EQ(s.lr_at(80), 1.0);               // the cooldown's first step: progress 0
  EXPECT_DOUBLE_EQ(s.lr_at(95), 0.1 + 0.9 * 0.5);   // halfway through it
  EXPECT_NEAR(s.lr_at(109), 0.1 + 0.9 / 30, 1e-15);  // its last step
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  for (int64_t t = 80; t < 110; ++t) EXPECT_LT(s.lr_at(t + 1), s.lr_at(t)) << "not decreasing at " << t;
  // The two ends: no cooldown holds the peak to the last step; a whole cooldown is the linear schedule.
  o.cooldown_fraction = 0;
  EXPECT_EQ(Schedule(o).lr_at(109), 1.0);
  EXPECT_EQ(Schedule(o).lr_at(110), 0.1);
  o.cooldown_fraction = 1;
  const Schedule linear(options(ScheduleKind::linear));
  for (int64_t t = 0; t < 120; ++t) EXPECT_EQ(Schedule(o).lr_at(t), linear.lr_at(t)) << t;
  o.cooldown_fraction = 1.5;
  EXPECT_THROW(Schedule{o}, InputError);
}

TEST(Schedule, ConstantAndNoWarmup) {
  const Schedule constant({.kind = ScheduleKind::constant, .lr = 3e-4});
  EXPECT_EQ(constant.lr_at(0), 3e-4);
  EXPECT_EQ(constant.lr_at(1000000), 3e-4);
  const Schedule cosine({.kind = ScheduleKind::cosine, .lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .decay_steps = 4});
  EXPECT_DOUBLE_EQ(cosine.lr_at(0), 2.0);
  EXPECT_DOUBLE_EQ(cosine.lr_at(2), 1.0);
  EXPECT_DOUBLE_EQ(cosine.lr_at(4), 0.0);
}

TEST(Schedule, RejectsInconsistentOptions) {
  EXPECT_THROW(Schedule({.kind = ScheduleKind::cosine, .lr = 1.0, .min_lr = 2.0, .decay_steps = 10}), InputError);
  EXPECT_THROW(Schedule({.kind = ScheduleKind::linear, .lr = 1.0, .warmup_steps = 20, .decay_steps = 10}),
               InputError);
  EXPECT_THROW(Schedule({.kind = ScheduleKind::constant, .lr = -1.0}), InputError);
  EXPECT_EQ(parse_schedule_kind("cosine"), ScheduleKind::cosine);
  testing::expect_error<InputError>([] { parse_schedule_kind("cosine_with_restarts"); },
                                    "choices: constant, cosine, linear, wsd");
}

}  // namespace
}  // namespace tf::optim

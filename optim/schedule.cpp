// Learning-rate schedules; the formulas are in schedule.h.
#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "framework/error.h"

namespace tf::optim {

const char* schedule_kind_name(ScheduleKind kind) {
  static const char* names[] = {"constant", "cosine", "linear", "wsd"};
  return names[static_cast<int>(kind)];
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::constant, ScheduleKind::cosine, ScheduleKind::linear, ScheduleKind::wsd})
    if (name == schedule_kind_name(k)) return k;
  throw InputError(concat("unknown learning-rate schedule '", name, "' (choices: constant, cosine, linear, wsd)"));
}

Schedule::Schedule(const ScheduleOptions& o) : options_(o) {
  TF_CHECK_INPUT(std::isfinite(o.lr) && o.lr >= 0, "schedule: lr must be finite and >= 0, got ", o.lr);
  TF_CHECK_INPUT(o.warmup_steps >= 0, "schedule: warmup_steps must be >= 0, got ", o.warmup_steps);
  if (o.kind == ScheduleKind::constant) return;
  TF_CHECK_INPUT(o.min_lr >= 0 && o.min_lr <= o.lr, "schedule: min_lr must be in [0, lr = ", o.lr, "], got ",
                 o.min_lr);
  TF_CHECK_INPUT(o.decay_steps >= o.warmup_steps, "schedule: decay_steps (", o.decay_steps,
                 ") must be >= warmup_steps (", o.warmup_steps, ")");
  TF_CHECK_INPUT(o.cooldown_fraction >= 0 && o.cooldown_fraction <= 1, "schedule: cooldown_fraction must be in [0, 1], got ",
                 o.cooldown_fraction);
}

double Schedule::lr_at(int64_t step) const {
  TF_CHECK(step >= 0, "schedule: negative step ", step);
  const ScheduleOptions& o = options_;
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (o.kind == ScheduleKind::constant) return o.lr;
  if (step >= o.decay_steps) return o.min_lr;
  // The decay's first step: W for cosine and linear, the cooldown's start C for wsd.
  const int64_t from = o.kind != ScheduleKind::wsd
                           ? o.warmup_steps
                           : o.decay_steps - std::llround(o.cooldown_fraction * static_cast<double>(o.decay_steps - o.warmup_steps));
  if (step < from) return o.lr;
  const double progress = static_cast<double>(step - from) / static_cast<double>(o.decay_steps - from);  // [0, 1)
  if (o.kind == ScheduleKind::cosine)
    return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
  return o.min_lr + (o.lr - o.min_lr) * (1 - progress);
}

}  // namespace tf::optim

// Learning-rate schedules: a pure function from the step index to the learning rate, so a resumed
// run needs no schedule state. `step` is the 0-based index of the update about to be taken.
//
// With peak lr, floor min_lr, W = warmup_steps and D = decay_steps (the step the floor is reached):
//   warmup (s < W):      lr * (s + 1) / W          linear from lr / W up to lr at s = W - 1
//                                                  (never 0, so the first update is not wasted)
//   constant (s >= W):   lr
//   cosine (W <= s < D): min_lr + (lr - min_lr) * (1 + cos(pi * (s - W) / (D - W))) / 2
//                        (Loshchilov & Hutter 2017, SGDR, one cycle without restarts)
//   linear (W <= s < D): min_lr + (lr - min_lr) * (1 - (s - W) / (D - W))
//   wsd (W <= s < D):    warmup-stable-decay: lr until C = D - round(f * (D - W)), then linear to
//                        min_lr: min_lr + (lr - min_lr) * (1 - (s - C) / (D - C)), f = cooldown_fraction
//                        (Hu et al. 2024, MiniCPM; Hagele et al. 2024 find f = 0.2 matches cosine)
//   after (s >= D):      min_lr                    (cosine, linear and wsd)
//
//   Schedule schedule({.kind = ScheduleKind::cosine, .lr = 6e-4, .min_lr = 6e-5,
//                      .warmup_steps = 200, .decay_steps = 5000});
//   opt.set_lr(schedule.lr_at(step));
#pragma once
#include <cstdint>
#include <string>

namespace tf::optim {

enum class ScheduleKind { constant, cosine, linear, wsd };
const char* schedule_kind_name(ScheduleKind kind);
// "constant", "cosine", "linear" or "wsd"; anything else is an InputError listing the choices.
ScheduleKind parse_schedule_kind(const std::string& name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::cosine;
  double lr = 6e-4;            // peak learning rate
  double min_lr = 0;           // floor of the decay, e.g. lr / 10; ignored by constant
  int64_t warmup_steps = 0;    // e.g. 200
  int64_t decay_steps = 0;     // e.g. 5000, >= warmup_steps; ignored by constant
  double cooldown_fraction = 0.2;  // wsd: the share of the steps after warmup spent decaying, in [0, 1]
};

class Schedule {
 public:
  explicit Schedule(const ScheduleOptions& options);  // InputError on inconsistent options
  double lr_at(int64_t step) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace tf::optim

// train.time_budget: the step count fixed from measured speed so that the run ends on time, and the
// learning-rate schedule with it (Note [time budget] in time_budget.cpp).
//
//   TimeBudget budget(seconds, {comm, progress, elapsed, time_one_evaluation, more_seconds});
//   ... after each train_step:  budget.after_step(run, seconds_it_took, steps_done_here);
//   ... after each checkpoint:  budget.checkpoint_written();
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "framework/dist/comm.h"
#include "train/progress.h"
#include "train/run.h"

namespace tf::train {

// The steps of this process before the speed is measured, and the last measured one.
inline constexpr int64_t kBudgetWarmSteps = 2, kBudgetMeasuredSteps = 10;
// The second measurement lasts this share of the time that was left at the first.
inline constexpr double kBudgetRemeasureShare = 0.05;

struct BudgetMeasure {
  double budget_seconds, elapsed_seconds, step_seconds, eval_seconds;
  int64_t eval_interval, step, max_steps;
};
// The step count that ends the run within the budget: the current step plus the steps the remaining
// time pays for, evaluations included, clamped to [step, max_steps].
int64_t budget_total_steps(const BudgetMeasure& m);

class TimeBudget {
 public:
  struct Env {
    dist::Comm& comm;
    Progress& progress;
    std::function<double()> elapsed;              // the run's training seconds so far
    std::function<double()> time_one_evaluation;  // runs one evaluation, returns its seconds
    double more_seconds = 0;                      // --more: the budget is the run's time so far plus this
  };
  TimeBudget(double budget_seconds, Env env) : budget_(budget_seconds), env_(std::move(env)) {}

  // After each step of this process: `step_seconds` is what train_step took, `steps_done` this
  // process's steps so far. Fixes run.budget_steps and the schedule when the measurement is done.
  void after_step(Run& run, double step_seconds, int64_t steps_done);
  // A checkpoint holds the count, so from then on it is final: a run resumed from the checkpoint must
  // train to the count a straight run trains to.
  void checkpoint_written() { remeasuring_ = false; }

 private:
  // Fixes the count at no fewer than at_least steps, says so with `how` (the second measurement).
  void fix(Run& run, double step_seconds, const char* how, int64_t at_least = 0);
  bool rank0_says(bool yes);  // rank 0's decision, on every rank

  double budget_;  // seconds; 0: none
  Env env_;
  int64_t full_steps_ = 0;            // this process's steps at the full shape (batch_warmup.h)
  std::vector<double> first_steps_;   // seconds of steps 3 .. 10 of them
  double eval_seconds_ = 0;           // the timed evaluation
  bool remeasuring_ = false;          // after the first fix, until the second or a checkpoint
  double remeasure_until_ = 0;        // elapsed() at which the second measurement ends
  double remeasured_seconds_ = 0;
  int64_t remeasured_steps_ = 0, remeasure_from_step_ = 0;
};

}  // namespace tf::train

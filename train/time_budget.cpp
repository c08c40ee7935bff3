// train.time_budget; see time_budget.h.
#include "train/time_budget.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/error.h"
#include "train/batch_warmup.h"

namespace tf::train {

// Note [time budget]
// ~~~~~~~~~~~~~~~~~~~
// train.time_budget fixes the step count from measured speed, so that the learning-rate schedule
// (warmup, then decay over the whole run) ends when the time does. A fresh run trains with
// train.steps as the horizon; its steps 3 to 10 (after the first two, which pay for allocation and
// oneDNN's primitives) give the seconds per step (the median of their eight times), one evaluation
// is timed, and the count becomes
//   step + floor(remaining / (seconds per step + seconds per evaluation / eval.interval)),
// at most train.steps (budget_total_steps). The schedule is rebuilt over that count: steps already
// taken are unchanged when they were warmup steps, and the first ten steps' decay, if any, used
// the longer horizon.
//
// Then the speed is measured once more, over the steps until 5% of the time then left has passed
// (their mean), and the count and schedule are fixed again. Steps 3 to 10 are not yet at speed:
// in the 5-minute demo on a Xeon (2026-12-06) steps 10-40 took 0.059-0.076 s and steps 500-1000
// 0.058-0.074 as the machine's speed moved, so runs measured 0.0808 and 0.0673 s per step and ended
// after 4:01 and 4:29 of their 5 minutes. Between the two counts the schedule's horizon moves:
// nothing for WSD, whose rate is flat from the end of warmup to its cooldown; a small kink for
// cosine. A checkpoint written before the second measurement ends it: the checkpoint holds the
// count (/budget_steps), --resume continues to it and is not measured again, so a resumed run
// trains to the count a straight run does and stays bit-exact. Setup before the first step and the
// sample after the last are not counted.
int64_t budget_total_steps(const BudgetMeasure& m) {
  const double per_step = m.step_seconds + (m.eval_interval > 0 ? m.eval_seconds / m.eval_interval : 0.0);
  const double remaining = m.budget_seconds - m.elapsed_seconds;
  const double more = per_step > 0 ? std::floor(std::max(0.0, remaining) / per_step) : 0.0;
  return std::clamp<int64_t>(m.step + static_cast<int64_t>(std::min(more, 1e15)), m.step, m.max_steps);
}

namespace {
double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  return (*middle + *std::max_element(values.begin(), middle)) / 2;
}
}  // namespace

bool TimeBudget::rank0_says(bool yes) {
  if (env_.comm.size() == 1) return yes;
  return env_.comm.allreduce_max(env_.comm.rank() == 0 && yes ? 1 : 0) != 0;
}

void TimeBudget::after_step(Run& run, double step_seconds, int64_t steps_done) {
  if (budget_ <= 0) return;
  if (run.budget_steps == 0) {
    // Under data.seq_len_warmup or train.batch_warmup the steps counted are those at the full window
    // length and batch: smaller ones are faster and would buy too many. Should the budget run out
    // before those steps, the count is fixed where the run stands.
    const int64_t shape_warmup = shape_warmup_steps(run.recipe);
    if (run.step > shape_warmup && ++full_steps_ > kBudgetWarmSteps) first_steps_.push_back(step_seconds);
    if (full_steps_ == kBudgetMeasuredSteps && run.step < run.recipe.train.steps) {
      if (run.recipe.eval.interval > 0) eval_seconds_ = env_.time_one_evaluation();  // timed and discarded
      const double step_seconds_measured = median(first_steps_);
      fix(run, step_seconds_measured, "");
      TF_CHECK_INPUT(run.budget_steps >= run.recipe.schedule.warmup_steps, "train.time_budget ",
                     run.recipe.train.time_budget, " pays for ", run.budget_steps, " steps at the measured ",
                     step_seconds_measured, " s per step, fewer than schedule.warmup_steps = ",
                     run.recipe.schedule.warmup_steps, ": the learning rate would never finish warming up. Give a "
                     "longer train.time_budget or fewer schedule.warmup_steps (nothing was kept: the run wrote no "
                     "checkpoint)");
      remeasuring_ = run.budget_steps > run.step;
      remeasure_until_ = env_.elapsed() + kBudgetRemeasureShare * std::max(0.0, budget_ - env_.elapsed());
      remeasure_from_step_ = run.step + 1;
    } else if (shape_warmup > 0 && full_steps_ < kBudgetMeasuredSteps &&
               env_.comm.allreduce_max(env_.elapsed() >= budget_ ? 1 : 0) != 0) {
      fix(run, env_.elapsed() / static_cast<double>(steps_done), "");
    }
    return;
  }
  if (!remeasuring_) return;
  remeasured_seconds_ += step_seconds;
  ++remeasured_steps_;
  if (run.step >= run.budget_steps) {
    remeasuring_ = false;
    return;
  }
  if (!rank0_says(env_.elapsed() >= remeasure_until_)) return;
  remeasuring_ = false;
  const std::string how = " (measured again over steps " + std::to_string(remeasure_from_step_) + "-" +
                          std::to_string(run.step) + ")";
  fix(run, remeasured_seconds_ / static_cast<double>(remeasured_steps_), how.c_str(), run.recipe.schedule.warmup_steps);
}

void TimeBudget::fix(Run& run, double step_seconds, const char* how, int64_t at_least) {
  run.budget_steps = budget_total_steps({budget_, env_.elapsed(), step_seconds, eval_seconds_, run.recipe.eval.interval,
                                         run.step, run.recipe.train.steps});
  run.budget_steps = env_.comm.allreduce_max(env_.comm.rank() == 0 ? run.budget_steps : 0);  // rank 0's count
  run.budget_steps = std::max(run.budget_steps, at_least);
  if (run.budget_steps >= run.recipe.schedule.warmup_steps) run.schedule = run_schedule(run.recipe, run.budget_steps);
  env_.progress.set_total(run.budget_steps);
  env_.progress.note("time budget " +
                     (env_.more_seconds > 0 ? std::to_string(std::lround(budget_)) + " s in all (--more)"
                                            : run.recipe.train.time_budget) +
                     ": " + std::to_string(step_seconds).substr(0, 6) + " s per step" + how +
                     (eval_seconds_ > 0 ? ", " + std::to_string(eval_seconds_).substr(0, 5) + " s per evaluation" : "") +
                     ": training for " + std::to_string(run.budget_steps) + " steps");
}

}  // namespace tf::train

// How long a resumed run trains; see continuation.h.
//
// Note [continuing a run]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A checkpoint knows where its run ends: train.steps, or the count its time budget fixed
// (/budget_steps, Note [time budget] in time_budget.cpp). A resume continues to that end, bit for bit,
// unless the user asks for another (with --accept-changes, or --more):
//  - train.time_budget changed: the budget is the run's whole training time (earlier processes
//    included, the checkpoint's elapsed_s), measured again after this process's first steps;
//    train.steps (changed or not) still bounds it.
//  - train.steps changed (the budget not): the run ends at the new train.steps; a count the budget
//    had fixed no longer applies (the user named the end), and the budget is not measured again.
//  - --more 5m: "train this run 5 more minutes": a budget of elapsed_s + 5 minutes, measured
//    again; train.steps still bounds it.
// Any new end rebuilds the learning-rate schedule over the new length, which moves the learning
// rate at the resume step (a decayed cosine stretched to a later end climbs back up); the resume
// prints both values so that the jump is never silent.
#include "train/continuation.h"

#include <cmath>
#include <cstdio>
#include <ostream>

#include "framework/error.h"

namespace tf::train {

namespace {
std::string lr_text(double lr) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", lr);
  return text;
}
}  // namespace

std::string describe_schedule(const Recipe& recipe, int64_t total_steps) {
  std::string s = recipe.schedule.kind;
  if (recipe.schedule.kind != "constant") s += " to step " + std::to_string(total_steps);
  if (recipe.schedule.kind == "wsd")
    s += " (cooldown " + std::to_string(std::lround(recipe.schedule.cooldown_fraction * 100)) + "%)";
  if (recipe.schedule.warmup_steps > 0) s += " (warmup " + std::to_string(recipe.schedule.warmup_steps) + ")";
  return s;
}

double continue_run(Run& run, const Recipe& stored, const std::string& checkpoint, double more_seconds,
                    std::ostream& out) {
  const Recipe& given = run.recipe;
  const int64_t stored_total = run.budget_steps > 0 ? run.budget_steps : stored.train.steps;
  const double given_budget = parse_duration(given.train.time_budget).value_or(0);
  double budget = 0;  // seconds still to be turned into a step count
  std::string end;    // the new end, for the message
  if (more_seconds > 0) {
    budget = run.elapsed_seconds + more_seconds;
    run.budget_steps = 0;
    end = "--more: a time budget of " + std::to_string(static_cast<long long>(std::lround(budget))) +
          " s of training in all (" + std::to_string(static_cast<long long>(std::lround(run.elapsed_seconds))) +
          " s so far)";
  } else if (given_budget != parse_duration(stored.train.time_budget).value_or(0)) {
    budget = given_budget;
    run.budget_steps = 0;
    TF_CHECK_INPUT(budget == 0 || budget > run.elapsed_seconds, "--resume: train.time_budget ",
                   given.train.time_budget, " is the run's whole training time, and it has trained ",
                   std::lround(run.elapsed_seconds), " s already: give a longer budget, or train for more time ",
                   "with --more (e.g. --more 5m)");
    end = "train.time_budget " + (budget > 0 ? given.train.time_budget : std::string("none"));
  } else if (given.train.steps != stored.train.steps) {
    run.budget_steps = 0;  // the user named the end
    end = "train.steps " + std::to_string(given.train.steps);
  } else if (run.budget_steps == 0) {
    budget = given_budget;  // a budget whose count was not fixed yet (stopped within its first steps)
  }
  const int64_t total = run.total_steps();
  const std::string how_on = "raise train.steps (--set train.steps=" + std::to_string(run.step + given.train.steps) +
                             " --accept-changes) or train for more time (--more 5m)";
  TF_CHECK_INPUT(run.step < total, "--resume: ", checkpoint, " is at step ", run.step,
                 run.budget_steps > 0 ? ", the end its time budget fixed" : ", and train.steps is ",
                 run.budget_steps > 0 ? "" : std::to_string(given.train.steps), ": nothing is left to train. To ",
                 "train further, ", how_on);
  run.schedule = run_schedule(given, total);

  const double before = run_schedule(stored, stored_total).lr_at(run.step), now = run.schedule.lr_at(run.step);
  if (!end.empty() || std::fabs(now - before) > 1e-12 * std::max(std::fabs(before), 1e-30)) {
    out << "continuing to " << (end.empty() ? "step " + std::to_string(total) : end) << ": the learning rate at step "
        << run.step << " is " << lr_text(now) << " (" << describe_schedule(given, total) << "), "
        << (now == before ? "as" : "was " + lr_text(before)) << " in the checkpoint's schedule ("
        << describe_schedule(stored, stored_total) << ")"
        << (budget > 0 ? "; the step count is fixed again after measuring this process's speed" : "") << "\n";
  }
  return budget;
}

}  // namespace tf::train

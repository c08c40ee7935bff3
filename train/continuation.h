// How long a resumed run trains (Note [continuing a run] in continuation.cpp): to the checkpoint's
// end, to a changed train.steps, to a changed train.time_budget, or for `--more` time; and what the
// learning rate does at the resume step when the schedule's length changes.
//
//   const double budget = continue_run(run, stored_recipe, ckpt, more_seconds, out);  // after loading the checkpoint
//   // run.total_steps(), run.schedule: the resumed run's; budget > 0: measure the speed, then fix the count
#pragma once
#include <iosfwd>
#include <string>

#include "train/recipe.h"
#include "train/run.h"

namespace tf::train {

// `run` holds the state of `checkpoint` (its path, for messages) and the given recipe; `stored` is the
// checkpoint's recipe.
// Sets run.budget_steps and run.schedule, prints a line when the learning rate at the resume step
// changes, and returns the time budget (seconds of training, earlier processes included) still to
// be turned into a step count, or 0. InputError when nothing is left to train, naming the ways on.
double continue_run(Run& run, const Recipe& stored, const std::string& checkpoint, double more_seconds,
                    std::ostream& out);

// The schedule's shape in words, for messages: "cosine over 5683 steps (warmup 100)".
std::string describe_schedule(const Recipe& recipe, int64_t total_steps);

}  // namespace tf::train

// One optimizer step: zero the gradients, forward and backward over grad_accum micro-batches,
// check that loss and gradients are finite, clip, update. The training loop calls it; the
// steady-state test calls it to show a step allocates nothing once warm.
#pragma once
#include "layers/module.h"
#include "train/run.h"

namespace tf::train {

struct StepResult {
  double loss = 0;       // mean training loss over the micro-batches
  double grad_norm = 0;  // global gradient norm before clipping
};

// Runs one step at the schedule's learning rate for run.step and advances run.step and
// run.tokens_seen. A non-finite loss or gradient throws InputError naming the step, before the
// update (so that state never reaches a checkpoint).
StepResult train_step(Run& run, Batches& batches, const layers::Context& ctx);

}  // namespace tf::train

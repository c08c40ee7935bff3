// One optimizer step: zero the gradients, forward and backward over grad_accum micro-batches,
// check that loss and gradients are finite, clip, update. The training loop calls it; the
// steady-state test calls it to show a step allocates nothing once warm.
#pragma once
#include <string>

#include "layers/module.h"
#include "train/run.h"

namespace tf::train {

struct StepResult {
  double loss = 0;       // mean training loss over the micro-batches
  double grad_norm = 0;  // global gradient norm before clipping
  int64_t tokens = 0;    // tokens trained on: grad_accum x batch_size x the step's window (data.seq_len_warmup)
};

// Runs one step at the schedule's learning rate for run.step and advances run.step and
// run.tokens_seen. A non-finite loss or gradient throws InputError naming the step, before the
// update (so that state never reaches a checkpoint).
// Under mpirun each rank runs grad_accum / N of the step's micro-batches and the gradients are summed
// across ranks (train/grad_sync.h); every rank leaves with the same parameters and result.
StepResult train_step(Run& run, Batches& batches, const layers::Context& ctx);

// Whether a step's matmuls run in bfloat16: train.matmul_precision bf16, or auto on a CPU that
// multiplies bfloat16 in hardware faster than float32 (kernels::bf16_faster, timed once).
bool bf16_matmuls(const TrainConfig& train);

// The error for a grad_accum that `ranks` processes cannot divide.
std::string ranks_message(int64_t grad_accum, int64_t ranks);

}  // namespace tf::train

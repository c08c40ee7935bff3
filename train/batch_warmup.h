// Batch-size warm-up (train.batch_warmup): a step's batch starts with fewer sequences and grows to
// train.batch_size, so that the first steps, whose gradients point the same way in small batches and
// large (the gradient noise scale starts small: McCandlish et al. 2018, "An Empirical Model of
// Large-Batch Training"), are many and cheap. GPT-3 grew its batch linearly over the first 4-12
// billion tokens (Brown et al. 2020, "Language Models are Few-Shot Learners", section 2.3).
//
// Here the batch grows linearly from a start to the full size over a number of steps, one row at a
// time. A step's micro-batches are drawn whole as always and their first B(step) rows trained on, so
// the batcher's draws, its state in a checkpoint, and a resumed run do not depend on the warm-up:
//   B(s) = batch_size                                                 for s >= warmup
//   B(s) = max(start, floor(start + (batch_size - start) s / warmup))  otherwise
// with s the index of the step (0 for the first) and start train.batch_start (0: a quarter of
// train.batch_size, at least 1).
#pragma once
#include <cstdint>

#include "framework/tensor.h"
#include "train/recipe.h"

namespace tf::train {

int64_t batch_start(const TrainConfig& train);              // the first steps' rows per micro-batch
int64_t batch_rows(const TrainConfig& train, int64_t step);  // B(step), above

// The first n rows of a (B, ...) tensor; the tensor itself when n is B or it is undefined.
Tensor first_rows(const Tensor& t, int64_t n);

// Steps before every step has its full shape (data.seq_len_warmup, train.batch_warmup): the time
// budget measures its speed on the steps after them (Note [time budget]).
int64_t shape_warmup_steps(const Recipe& recipe);

}  // namespace tf::train

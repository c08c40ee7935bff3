// Sequence-length warm-up (data.seq_len_warmup): a GPT's training windows start short and grow to
// data.seq_len, so that the first steps, which learn the most from local statistics, are many and cheap.
//
// Li, Zhang and He 2022, "The Stability-Efficiency Dilemma: Investigating Sequence Length Warmup for
// Training GPT Models" (NeurIPS): the length grows linearly from a start to the full length over a
// number of steps, in multiples of 8. Here a step's windows are drawn at the full length as always and
// their first T(step) columns trained on, so the batcher's draws, its state in a checkpoint, and a
// resumed run do not depend on the warm-up:
//   T(s) = seq_len                                                   for s >= warmup
//   T(s) = max(start, 8 floor((start + (seq_len - start) s / warmup) / 8))  otherwise
// with s the index of the step (0 for the first) and start data.seq_len_start (0: a quarter of
// data.seq_len, at least 1).
#pragma once
#include <cstdint>

#include "framework/tensor.h"
#include "train/recipe.h"

namespace tf::train {

int64_t seq_len_start(const DataConfig& data);              // the first steps' window length
int64_t window_length(const DataConfig& data, int64_t step);  // T(step), above

// The first n columns of a (B, T) id or target tensor: (B, n). The tensor itself when n is T.
Tensor first_columns(const Tensor& ids, int64_t n);

}  // namespace tf::train

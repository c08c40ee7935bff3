// How a training step's threads share the work: within each op (ops), or by the batch's rows
// (batch), each thread running the whole forward and backward of its rows.
//
// Note [batch-split threads]: a small model's step is hundreds of short ops. Split within each op,
// the threads meet at a fork and a join per op, and most GEMMs are too small to keep two cores busy
// (docs/performance.md, "Threads in a training step": at the demo's size 2 threads ran 1.3-1.5x of
// one, 2 MPI ranks 1.7-2.0x). Split by rows, each thread runs its part of the micro-batch with
// one-thread kernels and meets the others once, at the end of its backward, as two ranks would,
// but in one process and without copying the parameters: each thread's parameter gradients go to
// slots of its own (framework/autograd/private_grads.h) and are then added in thread order.
//
// The loss is that of the unsplit micro-batch: cross-entropy is a mean over the targets that are not
// ignored, so part p's mean is weighted by its share n_p / n of those targets, and
// sum_p (n_p / n) mean_p = the mean over all n. The gradient is the same sum, added in a different
// order than within one thread, so the numbers agree with the unsplit step to rounding; they are
// the same bits run after run for a given thread count, but not across thread counts, which is why
// train.deterministic keeps the split within ops.
//
//   BatchSplit split(params, parts);
//   double loss = split.run(model, inputs, targets, key_padding, ctx, 1.0 / grad_accum);
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "framework/autograd/private_grads.h"
#include "layers/models/model.h"

namespace tf::train {

struct Recipe;

// Into how many parts of rows a step's micro-batches are cut: 1 (the split is within ops) or
// min(threads, train.batch_size). train.thread_split: ops gives 1; batch gives the parts when
// threads > 1; auto (the default) as batch, except under train.deterministic, train.anomaly,
// sequence parallel training or more than one rank, which keep the split within ops.
// train.thread_split: batch together with one of those is an InputError saying which.
int64_t batch_split_parts(const Recipe& recipe, int threads, int ranks);

class BatchSplit {
 public:
  BatchSplit(const std::vector<Tensor>& params, int64_t parts);
  int64_t parts() const { return static_cast<int64_t>(gradients_.size()); }

  // Forward and backward of model.loss on the micro-batch (B, T), part p's rows on thread p, each
  // part's loss scaled by its share of the targets times `scale` before its backward. The parameter
  // gradients are then added to the parameters' own. Returns the micro-batch's loss (unscaled).
  // ctx.rng, when set, is forked by part: part p's dropout draws from a stream of its own.
  double run(const layers::LanguageModel& model, const Tensor& inputs, const Tensor& targets,
             const Tensor& key_padding, const layers::Context& ctx, double scale);

 private:
  std::vector<PrivateGradients> gradients_;  // one per part
  std::vector<double> losses_;               // part p's weighted loss, kept: a warm step allocates nothing
  std::vector<std::exception_ptr> errors_;   // what part p threw
};

// Rows [begin, end) of a (B, ...) tensor, copied; an undefined tensor stays undefined.
Tensor rows(const Tensor& t, int64_t begin, int64_t end);

}  // namespace tf::train

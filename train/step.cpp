// One optimizer step; see step.h.
#include "train/step.h"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/kernels/bf16.h"
#include "framework/kernels/mode.h"
#include "framework/ops/elementwise.h"
#include "optim/clip.h"
#include "train/batch_warmup.h"
#include "train/seq_len_warmup.h"
#include "train/sequence_parallel.h"
#include "train/thread_split.h"

namespace tf::train {

namespace {

bool all_finite_grads(const Run& run) {
  for (const auto& p : run.params) {
    const Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    const float* d = g.data<float>();
    for (int64_t i = 0, n = g.numel(); i < n; ++i)
      if (!std::isfinite(d[i])) return false;
  }
  return true;
}

std::vector<Tensor> parameter_tensors(const Run& run) {
  std::vector<Tensor> params;
  for (const auto& p : run.params) params.push_back(p.tensor);
  return params;
}

}  // namespace

std::string ranks_message(int64_t grad_accum, int64_t ranks) {
  return concat("train.grad_accum is ", grad_accum, " micro-batches per step, which ", ranks,
                " ranks cannot share evenly: the micro-batches of a step are divided among the ranks, so "
                "that the result does not depend on their number. Set train.grad_accum to a multiple of ",
                ranks, " (--set train.grad_accum=", ranks * std::max<int64_t>(1, (grad_accum + ranks - 1) / ranks),
                ") or run on a number of ranks that divides ", grad_accum);
}

bool bf16_matmuls(const TrainConfig& train) {
  return train.matmul_precision == "bf16" || (train.matmul_precision == "auto" && kernels::bf16_faster());
}

StepResult train_step(Run& run, Batches& batches, const layers::Context& ctx) {
  const double lr = run.schedule.lr_at(run.step);
  run.optimizer->set_lr(lr);
  {
    profile::Scope scope("optimizer.zero_grad");
    run.optimizer->zero_grad();
  }
  // Data parallel (docs/distributed.md): the step's grad_accum micro-batches are the same on any
  // number of ranks; rank r runs its consecutive share of them and skips the others' batches.
  // Sequence parallel (train/sequence_parallel.h): every rank runs every micro-batch, on its columns.
  dist::Comm& comm = dist::Comm::world();
  const bool split = sequence_parallel(run.recipe);
  const int64_t accum = run.recipe.train.grad_accum, ranks = comm.size(), sharing = split ? 1 : ranks;
  TF_CHECK_INPUT(accum % sharing == 0, ranks_message(accum, ranks));
  const int64_t local_count = accum / sharing, first_local = split ? 0 : comm.rank() * local_count;
  if (split && !run.sequence_split)
    run.sequence_split = std::make_shared<SequenceSplit>(split_sequences(run.recipe, comm));
  if (!run.grad_sync) {
    run.grad_sync = std::make_shared<GradientSync>(
        parameter_tensors(run), comm, GradientSync::Options{.fixed_order = run.recipe.train.deterministic});
  }
  if (!run.batch_split_chosen) {  // Note [batch-split threads] in train/thread_split.h
    const int64_t parts = batch_split_parts(run.recipe, omp_get_max_threads(), static_cast<int>(ranks));
    if (parts > 1) run.batch_split = std::make_shared<BatchSplit>(parameter_tensors(run), parts);
    run.batch_split_chosen = true;
  }
  // data.seq_len_warmup and train.batch_warmup: this step trains on the first `window` columns of the
  // first `rows` rows of its micro-batches.
  const int64_t window = window_length(run.recipe.data, run.step), rows = batch_rows(run.recipe.train, run.step);
  double loss_sum = 0;
  {
    // The forward and backward only: the optimizer (Muon's Newton-Schulz products too) stays float32.
    if (!run.bf16) run.bf16 = bf16_matmuls(run.recipe.train);
    const kernels::Bf16MatmulScope precision(*run.bf16);
    for (int64_t micro = 0; micro < accum; ++micro) {
      const Batch batch = [&] {
        profile::Scope scope("batches.next");
        return batches.next();
      }();
      const int64_t local = micro - first_local;
      if (local < 0 || local >= local_count) continue;
      // Dropout draws from a stream of each micro-batch's own (the step's generator forked by the
      // micro-batch's index), so that rank r's micro-batch draws what it would draw in one process.
      // Sequence parallel ranks draw apart too: their masks cover different positions.
      Rng micro_rng = run.dropout_rng.fork(static_cast<uint64_t>(micro));
      if (split) micro_rng = micro_rng.fork(static_cast<uint64_t>(comm.rank()));
      layers::Context micro_ctx = ctx;
      if (ctx.rng) micro_ctx.rng = &micro_rng;
      Tensor inputs = first_rows(batch.inputs, rows), targets = first_rows(batch.targets, rows);
      const Tensor key_padding = first_rows(batch.key_padding, rows);
      if (split) {  // this rank's columns; the loss is the mean of the ranks' equal shares
        micro_ctx.shard = &run.sequence_split->shard;
        inputs = columns(inputs, run.sequence_split->positions);
        targets = columns(targets, run.sequence_split->positions);
      } else {  // (the recipe refuses data.seq_len_warmup with sequence parallel training)
        inputs = first_columns(inputs, window);
        targets = first_columns(targets, window);
      }
      try {
        run.grad_sync->begin_micro(local, local_count);
        const int64_t parts = accum * (split ? ranks : 1);
        if (run.batch_split) {
          loss_sum += run.batch_split->run(*run.model, inputs, targets, key_padding, micro_ctx,
                                           1.0 / static_cast<double>(parts));
        } else {
          const Tensor loss = run.model->loss(inputs, targets, key_padding, micro_ctx);
          loss_sum += loss.item();
          backward(parts == 1 ? loss : ops::scale(loss, 1.0 / static_cast<double>(parts)));
        }
        run.grad_sync->end_micro(local, local_count);
      } catch (const Error& e) {
        run.grad_sync->abandon();
        if (!anomaly_detection()) throw;  // anomaly mode's errors are the user's to act on: say the step
        throw InputError(concat("step ", run.step + 1, ": ", e.what(), "; stopping (no checkpoint of this state is written)"));
      }
    }
  }
  run.dropout_rng.next_u64();  // the next step's micro-batches fork from the next state
  comm.allreduce_sum(std::span<double>(&loss_sum, 1));
  StepResult result;
  result.loss = loss_sum / static_cast<double>(accum * (split ? ranks : 1));
  TF_CHECK_INPUT(std::isfinite(result.loss), "step ", run.step + 1, ": the training loss is ", result.loss,
                 "; stopping (no checkpoint of this state is written). Try a lower optim.lr, "
                 "or set train.anomaly: true to find the op");
  {
    profile::Scope scope("clip_grad_norm");
    result.grad_norm = run.recipe.train.grad_clip > 0
                           ? optim::clip_grad_norm(run.optimizer->params(), run.recipe.train.grad_clip)
                           : optim::grad_norm(run.optimizer->params());
  }
  // The norm is summed in double, where squares of finite floats cannot overflow: a finite norm
  // means every gradient is finite, and only a non-finite one needs the scan (an f64 gradient's
  // squares can overflow). Clipping leaves the gradients alone when the norm is not finite.
  TF_CHECK_INPUT(std::isfinite(result.grad_norm) || all_finite_grads(run), "step ", run.step + 1,
                 ": a gradient is not finite; stopping (no checkpoint of this state is written)");
  {
    profile::Scope scope("optimizer.step");
    run.optimizer->step();
  }
  ++run.step;
  result.tokens = accum * rows * window;
  run.tokens_seen += result.tokens;
  return result;
}

}  // namespace tf::train

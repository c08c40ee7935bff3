// One optimizer step; see step.h.
#include "train/step.h"

#include <cmath>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "optim/clip.h"

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

}  // namespace

StepResult train_step(Run& run, Batches& batches, const layers::Context& ctx) {
  const double lr = run.schedule.lr_at(run.step);
  run.optimizer->set_lr(lr);
  {
    profile::Scope scope("optimizer.zero_grad");
    run.optimizer->zero_grad();
  }
  const int64_t accum = run.recipe.train.grad_accum;
  double loss_sum = 0;
  for (int64_t micro = 0; micro < accum; ++micro) {
    const Batch batch = [&] {
      profile::Scope scope("batches.next");
      return batches.next();
    }();
    try {
      const Tensor loss = run.model->loss(batch.inputs, batch.targets, batch.key_padding, ctx);
      loss_sum += loss.item();
      backward(accum == 1 ? loss : ops::scale(loss, 1.0 / accum));
    } catch (const Error& e) {
      if (!anomaly_detection()) throw;  // anomaly mode's errors are the user's to act on: say the step
      throw InputError(concat("step ", run.step + 1, ": ", e.what(), "; stopping (no checkpoint of this state is written)"));
    }
  }
  StepResult result;
  result.loss = loss_sum / accum;
  TF_CHECK_INPUT(std::isfinite(result.loss), "step ", run.step + 1, ": the training loss is ", result.loss,
                 "; stopping (no checkpoint of this state is written). Try a lower optim.lr, "
                 "or set train.anomaly: true to find the op");
  TF_CHECK_INPUT(all_finite_grads(run), "step ", run.step + 1,
                 ": a gradient is not finite; stopping (no checkpoint of this state is written)");
  {
    profile::Scope scope("clip_grad_norm");
    result.grad_norm = run.recipe.train.grad_clip > 0
                           ? optim::clip_grad_norm(run.optimizer->params(), run.recipe.train.grad_clip)
                           : optim::grad_norm(run.optimizer->params());
  }
  {
    profile::Scope scope("optimizer.step");
    run.optimizer->step();
  }
  ++run.step;
  run.tokens_seen += accum * run.recipe.train.batch_size * run.recipe.data.seq_len;
  return result;
}

}  // namespace tf::train

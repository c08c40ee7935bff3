// Head importance (Michel et al. 2019, "Are Sixteen Heads Really Better than One?", section 4.1): how
// much the loss leans on each attention head, read from a gate on the head's output, and the loss when
// that head alone is masked. The figures of `tapeformer heads`.
//
//   auto batcher = tf::train::causal_eval_batcher(run, tf::train::tokenize(run, val_text));
//   tf::inspect::HeadImportance r = tf::inspect::head_importance(*run.model, batcher, /*max_batches=*/40);
//   // r.heads[0]: the most important head: .layer, .head, .importance, .masked_loss - r.loss
//
// Note [head importance]
// Every head h of every layer gets a gate xi_h = 1 on its output (layers::Context::head_gates), so the
// loss is a function of the gates and dL/dxi_h = sum over positions and features of o_h * dL/do_h.
// Michel et al. define I_h = E_x |dL(x)/dxi_h|, the absolute value taken per example before the mean
// (opposite signs from different examples must not cancel). Our example is one sequence, a row of a
// batch, and L(x) is its mean cross-entropy over its predicted tokens. One batched backward gives all
// rows' derivatives: each row b has gates of its own (a (B, H) gate per layer), rows do not interact,
// and the batch loss is sum_b n_b L(x_b) / N (n_b predicted tokens in row b, N in the batch), so
//   dL(x_b)/dxi_{b,h} = N / n_b * dL_batch/dxi_{b,h}.
// Rows with nothing to predict (padding rows, a BERT window with no position chosen) are not examples.
// Within each layer the I_h are divided by their l2 norm over the layer's heads, as the paper does
// (it found the per-layer normalisation necessary to compare heads of different layers when pruning).
// The parameters' gradients are not computed (the gates' derivative does not need them) and the
// model's accumulated gradients are left as they were.
#pragma once
#include <cstdint>
#include <vector>

#include "data/batcher.h"
#include "layers/models/model.h"

namespace tf::inspect {

struct HeadScore {
  int64_t layer = 0, head = 0;
  double importance = 0;      // raw_importance / the l2 norm of its layer's raw importances
  double raw_importance = 0;  // mean over sequences of |dL(x)/dxi_h| (Note [head importance])
  double masked_loss = 0;     // the loss with this head's gate at 0 and every other at 1 (when measured)
};

struct HeadImportance {
  double loss = 0;         // with every head: tapeformer eval's loss on the same batches
  int64_t tokens = 0;      // predicted tokens the losses average over
  int64_t sequences = 0;   // the examples the importance averages over
  int64_t batches = 0;     // batches read
  std::vector<HeadScore> heads;  // every (layer, head), most important first (ties: layer, head)
};

// Reads the sequential batcher's batches (at most max_batches, 0 = the whole pass) once with gates that
// record their gradient, then once with no head masked and, with masked_losses, once per head masked;
// each pass rewinds it. tf::Error when the batches hold no predicted token.
HeadImportance head_importance(const layers::LanguageModel& model, data::CausalBatcher& sequential_batcher,
                               int64_t max_batches, bool masked_losses = true);
HeadImportance head_importance(const layers::LanguageModel& model, data::MaskedLmBatcher& sequential_batcher,
                               int64_t max_batches, bool masked_losses = true);

// A gate of 1 per head of every layer (layers::Context::head_gates): the model as it is.
std::vector<Tensor> all_open_gates(const layers::ModelConfig& config, DType dtype);

}  // namespace tf::inspect

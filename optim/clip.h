// Global gradient-norm clipping (Pascanu et al. 2013): if the L2 norm of all gradients together
// exceeds max_norm, every gradient is scaled by max_norm / norm, so the clipped norm is max_norm
// (PyTorch's clip_grad_norm_ divides by norm + 1e-6 instead and lands just below it).
//
// The norm is accumulated in double, in fixed blocks whose partial sums are added in a fixed
// order, so it is the same bits whatever the thread count (a resumed run stays bit-identical).
// A non-finite norm (an inf or NaN gradient) is returned and nothing is scaled: scaling by
// max_norm / inf would zero every gradient and by NaN would poison them; the caller decides
// (skip the step, stop the run).
//
//   const double norm = clip_grad_norm(params, 1.0);   // log it; the gradients now have norm <= 1
//   if (!std::isfinite(norm)) ...
#pragma once
#include <vector>

#include "optim/optimizer.h"

namespace tf::optim {

// L2 norm over every defined gradient of `params` (parameters without a gradient count as 0).
double grad_norm(const std::vector<ParamRef>& params);
// Returns the norm before clipping. max_norm must be > 0.
double clip_grad_norm(const std::vector<ParamRef>& params, double max_norm);
// Multiplies every defined gradient by `factor` (e.g. 1 / micro_batches for gradient accumulation).
void scale_grads(const std::vector<ParamRef>& params, double factor);

}  // namespace tf::optim

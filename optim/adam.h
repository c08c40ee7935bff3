// Adam (Kingma & Ba 2015, Algorithm 1) and AdamW (Loshchilov & Hutter 2019, "Decoupled Weight
// Decay Regularization", Algorithm 2), in the form of PyTorch's torch.optim.Adam / AdamW.
// Per element, at this parameter's step t = 1, 2, ... (m, v are 0 before the first update):
//   Adam:  g = g + weight_decay * p               (L2 regularisation, folded into the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)        (decoupled decay, applied FIRST, to the old p)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// eps is added outside the square root, after bias correction (PyTorch's convention; the paper
// writes sqrt(v_hat) + eps, which is the same). Weight decay applies only to ParamRef::decay
// parameters. As in PyTorch, AdamW's decay is scaled by the scheduled lr (the paper scales it by
// the schedule multiplier eta_t only, i.e. PyTorch's lr * wd is the paper's eta_t * lambda).
// Because the Adam step does not depend on p, "decay first" gives p_new = p (1 - lr wd) - step.
//
//   AdamW opt(params, {.lr = 6e-4, .beta2 = 0.95, .weight_decay = 0.1});
#pragma once
#include "optim/optimizer.h"

namespace tf::optim {

struct AdamOptions {
  double lr = 1e-3;          // e.g. 6e-4 (the schedule overrides it every step)
  double beta1 = 0.9;
  double beta2 = 0.999;      // e.g. 0.95 for GPT pretraining
  double eps = 1e-8;
  double weight_decay = 0;   // e.g. 0.1; PyTorch's AdamW defaults to 0.01, ours to 0: say it in the recipe
};

// InputError naming `kind` ("adamw", "muon") for betas outside [0, 1), eps or weight_decay < 0.
void check_adam_options(const AdamOptions& options, const char* kind);

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<ParamRef> params, const AdamOptions& options = {});
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::vector<ParamRef> params, const AdamOptions& options, bool decoupled, const char* kind);
  void update(const ParamRef& p, const Tensor& grad, ParamState& s) override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<ParamRef> params, const AdamOptions& options = {})
      : Adam(std::move(params), options, /*decoupled=*/true, "adamw") {}
};

// One Adam update of n elements at step t (>= 1); weight_decay is 0 for exempt parameters.
struct AdamCoeffs {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // true: AdamW
  int64_t step;
};
// The reference: every intermediate in double, stored back as T. The test oracle.
template <class T>
void adam_update_reference(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const AdamCoeffs& c);
// The fast float32 path: float arithmetic, OpenMP over elements and a vectorisable body.
void adam_update_fast(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                      const AdamCoeffs& c);
// One update of p from grad with the slots exp_avg, exp_avg_sq of s: the fast kernel for float32
// (unless a ReferenceKernelsGuard is alive), the reference otherwise. Muon's non-matrix parameters
// take this path too.
void adam_update(const ParamRef& p, const Tensor& grad, ParamState& s, const AdamCoeffs& c);

}  // namespace tf::optim

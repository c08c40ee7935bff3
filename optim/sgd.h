// Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay, as PyTorch's
// torch.optim.SGD (dampening 0). Per element, with g the gradient and b the momentum buffer (0 before
// the first update, so the first update sets b = d exactly as PyTorch's clone does):
//   d = g + weight_decay * p                      (L2: added to the gradient; decay params only)
//   b = momentum * b + d                          (when momentum > 0)
//   d = nesterov ? d + momentum * b : b           (Sutskever et al. 2013, in PyTorch's form)
//   p = p - lr * d
//
//   Sgd opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once
#include "optim/optimizer.h"

namespace tf::optim {

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;       // e.g. 0.9; 0 keeps no state
  bool nesterov = false;     // needs momentum > 0
  double weight_decay = 0;   // e.g. 1e-4
};

class Sgd : public Optimizer {
 public:
  explicit Sgd(std::vector<ParamRef> params, const SgdOptions& options = {});
  const SgdOptions& options() const { return options_; }

 protected:
  void update(const ParamRef& p, const Tensor& grad, ParamState& s) override;

 private:
  SgdOptions options_;
};

// One SGD update of n elements; momentum_buffer is null when momentum == 0. `lr`, `weight_decay`
// are this parameter's (weight_decay 0 for exempt parameters).
struct SgdCoeffs {
  double lr, momentum, weight_decay;
  bool nesterov;
};
// The reference: every intermediate in double, stored back as T. The test oracle.
template <class T>
void sgd_update_reference(T* param, const T* grad, T* momentum_buffer, int64_t n, const SgdCoeffs& c);
// The fast float32 path: float arithmetic, OpenMP over elements and a vectorisable body.
void sgd_update_fast(float* param, const float* grad, float* momentum_buffer, int64_t n, const SgdCoeffs& c);
}  // namespace tf::optim

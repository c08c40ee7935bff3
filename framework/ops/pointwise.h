// Pointwise functions a selective state-space block needs (Gu & Dao 2023): exp (A = -exp(A_log)),
// SiLU (the conv's activation and the output gate) and softplus (the step size Delta); tanh
// (soft caps: c tanh(x / c)); and the sigmoid (gates, as model.attention_gate's).
//
//   Tensor a = ops::neg(ops::exp(a_log));        // (D, N)
//   Tensor g = ops::silu(z);                     // z sigmoid(z)
//   Tensor delta = ops::softplus(dt);            // log(1 + exp(dt)) > 0
//
// Each is one loop over the elements, forward and backward, f64 and f32 alike: there is nothing a
// faster kernel would do differently, so the loop is both the reference and the path taken.
// Derivatives, with s = sigmoid(x): exp' = exp; silu' = s (1 + x (1 - s)); softplus' = s;
// tanh' = 1 - tanh^2; sigmoid' = s (1 - s).
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

Tensor exp(const Tensor& x);
Tensor silu(const Tensor& x);      // x sigmoid(x) (Ramachandran et al. 2017; Elfwing et al. 2018)
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), computed as x past 20 (PyTorch's threshold)
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);   // 1 / (1 + exp(-x))

}  // namespace tf::ops

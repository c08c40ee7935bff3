// Matrix products: batched matmul with optional transposes, and linear (y = x W^T + b).
//
//   Tensor scores = ops::matmul(q, k, false, true);   // (B, H, T, D) . (B, H, T, D)^T -> (B, H, T, T)
//   Tensor y = ops::linear(x, weight, bias);          // (B, T, C_in) -> (B, T, C_out); weight (C_out, C_in)
//   Tensor y = ops::gelu_linear(h, weight, bias, GeluApprox::tanh);  // linear(gelu(h), ...), gelu(h) not kept
#pragma once
#include "framework/kernels/reference/activation.h"
#include "framework/tensor.h"

namespace tf::ops {

// a: (..., m, k) or (..., k, m) when trans_a; b: (..., k, n) or (..., n, k) when trans_b.
// The leading (batch) dims of a and b must be equal, or b may be a plain matrix shared by all.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// x: (..., in), weight: (out, in) as in PyTorch, bias: (out) or undefined. Returns (..., out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// linear(gelu(pre_activation), weight, bias), the second half of a transformer MLP, with GELU's
// output recomputed in the backward instead of stored: the tape keeps only pre_activation, which
// GELU's own backward needs anyway, so the MLP keeps 4 C floats per token instead of 8 C
// (selective activation recomputation: Chen et al. 2016, "Training Deep Nets with Sublinear
// Memory Cost"; Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
// Models"). The price is one more GELU forward per step.
Tensor gelu_linear(const Tensor& pre_activation, const Tensor& weight, const Tensor& bias,
                   kernels::GeluApprox approx);

}  // namespace tf::ops

// Matrix products: batched matmul with optional transposes, and linear (y = x W^T + b).
//
//   Tensor scores = ops::matmul(q, k, false, true);   // (B, H, T, D) . (B, H, T, D)^T -> (B, H, T, T)
//   Tensor y = ops::linear(x, weight, bias);          // (B, T, C_in) -> (B, T, C_out); weight (C_out, C_in)
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

// a: (..., m, k) or (..., k, m) when trans_a; b: (..., k, n) or (..., n, k) when trans_b.
// The leading (batch) dims of a and b must be equal, or b may be a plain matrix shared by all.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// x: (..., in), weight: (out, in) as in PyTorch, bias: (out) or undefined. Returns (..., out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tf::ops

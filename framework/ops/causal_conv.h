// Causal depthwise convolution over time, the short convolution of a Mamba block (Gu & Dao 2023,
// section 3.4, "Conv"): each channel c filters its own past K inputs,
//
//   y[b, t, c] = bias[c] + sum_{k=0}^{K-1} weight[c, k] x[b, t - (K - 1) + k, c]
//
// with x taken as 0 before t = 0 (PyTorch's Conv1d with groups = C and padding K - 1, its last K - 1
// outputs cut). Backward:
//   dx[b, s, c]   = sum_k weight[c, k] dy[b, s + (K - 1) - k, c]     (terms past T - 1 are 0)
//   dweight[c, k] = sum_{b, t} dy[b, t, c] x[b, t - (K - 1) + k, c]
//   dbias[c]      = sum_{b, t} dy[b, t, c]
//
//   Tensor y = ops::causal_conv1d(x, ops::reshape(conv.weight, {C, K}), conv.bias);   // (B, T, C)
//
// Decoding carries the last K - 1 inputs, (B, K - 1, C): prepend them to the new positions, convolve,
// keep the last T outputs (causal_conv1d_append).
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

// x (B, T, C); weight (C, K); bias (C) or undefined. Returns (B, T, C).
Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias);

// Inference: x (B, T, C) the new positions, state (B, K - 1, C) the inputs before them (zeros at the
// start). Returns their outputs, the rows causal_conv1d over the whole sequence gives them, and
// moves the state on in place to the last K - 1 inputs.
Tensor causal_conv1d_append(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& state);

}  // namespace tf::ops

// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016, "Layer Normalization"), with
// PyTorch's conventions: biased variance, eps inside the square root, optional weight and bias.
//
//   Tensor h = ops::layer_norm(x, ln_weight, ln_bias);      // x (B, T, C), weight and bias (C)
//   Tensor n = ops::layer_norm(x, Tensor(), Tensor());      // no affine part
#pragma once
#include "framework/kernels/reference/layer_norm.h"
#include "framework/tensor.h"

namespace tf::ops {

// x (..., C); weight (C) or undefined (then 1); bias (C) or undefined (then 0); eps > 0 typically.
//   y = (x - mean) / sqrt(var + eps) * weight + bias,  mean and var over the last axis.
// kind rms: RMSNorm (Zhang & Sennrich 2019), y = x / sqrt(mean(x^2) + eps) * weight (+ bias if given).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  kernels::NormKind kind = kernels::NormKind::layer);

// The pre-LN block's `h = x + a; n = layer_norm(h)` as one op: one pass over the rows forward, and
// backward one pass forming dh = (h's own gradient) + (the norm's), handed to both x and a.
// Measured against ops::add then ops::layer_norm in the pre-LN block (bench_train_step, one thread,
// process CPU seconds, runs alternated): config A 6.43 -> 6.20 s for 20 steps, config C 3.37 ->
// 3.12 s for 8 (docs/performance.md, a loaded machine: the A figure is near the noise).
// x and a (..., C) of the same shape; weight, bias and eps as layer_norm.
//
//   auto [h, n] = ops::add_layer_norm(x, attn_out, ln_2.weight, ln_2.bias);   // layers/block.cpp
struct ResidualNorm {
  Tensor sum;     // h = x + a (..., C)
  Tensor normed;  // layer_norm(h) (..., C)
};
ResidualNorm add_layer_norm(const Tensor& x, const Tensor& a, const Tensor& weight, const Tensor& bias,
                            double eps = 1e-5, kernels::NormKind kind = kernels::NormKind::layer);

}  // namespace tf::ops

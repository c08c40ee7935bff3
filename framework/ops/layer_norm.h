// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016, "Layer Normalization"), with
// PyTorch's conventions: biased variance, eps inside the square root, optional weight and bias.
//
//   Tensor h = ops::layer_norm(x, ln_weight, ln_bias);      // x (B, T, C), weight and bias (C)
//   Tensor n = ops::layer_norm(x, Tensor(), Tensor());      // no affine part
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

// x (..., C); weight (C) or undefined (then 1); bias (C) or undefined (then 0); eps > 0 typically.
//   y = (x - mean) / sqrt(var + eps) * weight + bias,  mean and var over the last axis.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace tf::ops

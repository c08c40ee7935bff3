// Reductions: sum and mean over every axis (-> scalar) or over chosen axes, optionally keeping them
// as size-1 axes so the result broadcasts back against the input.
//
//   Tensor loss = ops::mean(losses);                       // (B, T) -> ()
//   Tensor mu = ops::mean(x, {-1}, /*keepdim=*/true);      // (B, T, C) -> (B, T, 1)
//   Tensor centred = ops::sub(x, mu);                      // (B, T, C)
//   Tensor per_batch = ops::sum(x, {1, 2});                // (B, T, C) -> (B,)
#pragma once
#include <vector>

#include "framework/tensor.h"

namespace tf::ops {

Tensor sum(const Tensor& x);  // every axis: returns a scalar (shape ())
// Axes may be negative (-1 is the last); each may appear once; the list may not be empty.
Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdim = false);

// For backward functions: the sum over the rows of a (rows, cols) gradient, as a new (cols) tensor,
// which is the gradient of a bias added to every row (linear, bias_gelu). Not recorded. Float32
// goes to kernels/cpu/reduce.h (float accumulation, like the matmul beside it); float64, and
// float32 under ReferenceKernelsGuard, to the reference.
Tensor bias_gradient(const Tensor& grad, int64_t rows, int64_t cols);

}  // namespace tf::ops

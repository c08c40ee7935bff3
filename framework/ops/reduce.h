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

}  // namespace tf::ops

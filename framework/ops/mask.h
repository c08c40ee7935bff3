// Masks for attention: masked_fill (replace positions where a mask is set) and the causal mask.
//
//   Tensor future = ops::causal_mask(t, t, scores.dtype());              // (T, T): 1 above the diagonal
//   Tensor scores = ops::masked_fill(raw_scores, future, -INFINITY);     // (B, H, T, T)
#pragma once
#include <cstdint>

#include "framework/tensor.h"

namespace tf::ops {

// y = value where mask != 0, x elsewhere. mask has x's dtype and broadcasts to x's shape (NumPy
// rules, x's shape unchanged). The gradient reaches x only, and is 0 at filled positions.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// (t_q, t_k): 1 where key j lies in query i's future, j > i + (t_k - t_q), else 0. The queries are
// the last t_q of the t_k positions (t_q == t_k in training; t_q < t_k when earlier keys are
// cached), so every query sees at least its own position: 0 <= t_q <= t_k.
Tensor causal_mask(int64_t t_q, int64_t t_k, DType dtype = DType::f32);

}  // namespace tf::ops

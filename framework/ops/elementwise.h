// Elementwise arithmetic with NumPy broadcasting: add, sub, mul, div, and scaling by a constant.
//
//   Tensor y = ops::add(x, bias);          // (B, T, C) + (C,) -> (B, T, C)
//   Tensor z = ops::scale(y, 0.5);         // 0.5 * y
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, double factor);  // factor * x
Tensor neg(const Tensor& x);                   // -x

}  // namespace tf::ops

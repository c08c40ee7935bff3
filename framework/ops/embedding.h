// Embedding lookup: rows of a (V, C) table selected by integer ids of any shape.
//
//   Tensor tok = ops::embedding(wte, ids);     // wte (V, C), ids (B, T) i32 -> (B, T, C)
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

// weight (V, C) floating point; ids i32 of any shape, each in [0, V). Returns ids.shape + (C).
// The gradient reaches weight only (ids are data); rows used several times receive the sum.
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace tf::ops

// Fast float32 gated linear units: OpenMP over rows, a loop the compiler vectorises inside a row
// (exp_fast for the sigmoid, Note [fast exp]). Same contracts as kernels/reference/glu.h, which they
// are tested against (tests/framework/glu_test.cpp).
#pragma once
#include <cstdint>

#include "framework/kernels/reference/glu.h"

namespace tf::kernels {

void glu_forward_fast(FeedForwardKind kind, const float* h, int64_t rows, int64_t width, float* y);
void glu_backward_fast(FeedForwardKind kind, const float* h, const float* dy, int64_t rows, int64_t width, float* dh);

}  // namespace tf::kernels

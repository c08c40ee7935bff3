// Fast float32 GELU and ReLU: OpenMP across blocks of rows, loops the compiler vectorises inside a
// block (a polynomial exp instead of libm's scalar tanhf/erff). Same contracts as
// kernels/reference/activation.h, which they are tested against (tests/framework/activation_test).
//
// Accuracy: exp_fast to 0.87 ulp (Note [fast exp] in cpu/exp.h); the erf form uses Abramowitz &
// Stegun 7.1.26 (|error in erf| <= 1.5e-7, i.e. about one float ulp at 1), so gelu_erf is within
// ~1e-7 |x| of the exact value.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/activation.h"

namespace tf::kernels {

void gelu_forward_fast(GeluApprox approx, const float* x, const float* bias, int64_t rows, int64_t cols,
                       float* y);
void gelu_backward_fast(GeluApprox approx, const float* x, const float* bias, const float* dy, int64_t rows,
                        int64_t cols, float* dx);
void relu_forward_fast(const float* x, int64_t n, float* y);
void relu_backward_fast(const float* y, const float* dy, int64_t n, float* dx);

}  // namespace tf::kernels

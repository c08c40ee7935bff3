// Fast float32 cross-entropy kernels: OpenMP over rows, `omp simd` loops with exp_fast within a
// row. Same contracts as kernels/reference/cross_entropy.h, which they are tested against
// (tests/framework/cross_entropy_test.cpp).
#pragma once
#include "framework/kernels/reference/cross_entropy.h"

namespace tf::kernels {

CrossEntropySums cross_entropy_forward_fast(const CrossEntropyDims& d, const float* logits,
                                            const int32_t* targets, float* log_sum_exp);
void cross_entropy_backward_fast(const CrossEntropyDims& d, const float* logits, const int32_t* targets,
                                 const float* log_sum_exp, double g, float* dlogits);

}  // namespace tf::kernels

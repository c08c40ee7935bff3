// Fast float32 softmax and log-softmax over the rows of a (rows, cols) buffer: OpenMP over rows,
// `omp simd` loops with exp_fast inside each row. Same contracts as kernels/reference/softmax.h,
// which they are tested against (tests/framework/softmax_test.cpp). Softmax forward of (4096, 1024)
// float32, one thread of the shared 2-core development machine: 14 ms against the reference's
// 250 ms (exp_fast runs at 0.42 ns per element, std::exp at 3.6 ns).
#pragma once
#include <cstdint>

namespace tf::kernels {

void softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* probs);
void softmax_backward_fast(int64_t rows, int64_t cols, const float* probs, const float* dprobs, float* dx);
void log_softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* logprobs);
void log_softmax_backward_fast(int64_t rows, int64_t cols, const float* logprobs, const float* dlogprobs,
                               float* dx);

// Whether a row loop is big enough (64K elements in all) for an OpenMP parallel region to pay off.
inline bool worth_threads(int64_t rows, int64_t cols) { return rows > 1 && rows * cols >= (1 << 16); }

}  // namespace tf::kernels

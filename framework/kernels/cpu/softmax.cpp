// Fast float32 softmax / log-softmax: one row per OpenMP iteration, vectorised inner loops.
// Each row's sums are float SIMD reductions (8 or 16 partial sums), whose rounding error grows
// like cols / lanes * 2^-24; the reference accumulates in double.
#include "framework/kernels/cpu/softmax.h"

#include <cmath>

namespace tf::kernels {

void softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* probs) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* pr = probs + r * cols;
    const float inv = 1.0f / exp_shifted(xr, row_max(xr, cols), cols, pr);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) pr[j] *= inv;
  }
}

void softmax_backward_fast(int64_t rows, int64_t cols, const float* probs, const float* dprobs, float* dx) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = probs + r * cols;
    const float* dp = dprobs + r * cols;
    float* d = dx + r * cols;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < cols; ++j) dot += dp[j] * p[j];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) d[j] = p[j] * (dp[j] - dot);
  }
}

void log_softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* logprobs) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* lp = logprobs + r * cols;
    const float m = row_max(xr, cols);
    // (x - m) - log(total), not x - (m + log(total)): see the reference kernel.
    const float log_total = std::log(sum_exp_shifted(xr, m, cols));
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) lp[j] = (xr[j] - m) - log_total;
  }
}

void log_softmax_backward_fast(int64_t rows, int64_t cols, const float* logprobs, const float* dlogprobs,
                               float* dx) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* lp = logprobs + r * cols;
    const float* dlp = dlogprobs + r * cols;
    float* d = dx + r * cols;
    float total = 0;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < cols; ++j) total += dlp[j];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) d[j] = dlp[j] - exp_fast(lp[j]) * total;
  }
}

}  // namespace tf::kernels

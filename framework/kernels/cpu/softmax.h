// Fast float32 softmax and log-softmax over the rows of a (rows, cols) buffer: OpenMP over rows,
// `omp simd` loops with exp_fast inside each row. Same contracts as kernels/reference/softmax.h,
// which they are tested against (tests/framework/softmax_test.cpp). Softmax forward of (4096, 1024)
// float32, one thread of the shared 2-core development machine: 14 ms against the reference's
// 250 ms (exp_fast runs at 0.42 ns per element, std::exp at 3.6 ns).
#pragma once
#include <cstdint>
#include <limits>

#include "framework/kernels/cpu/exp.h"

namespace tf::kernels {

void softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* probs);
void softmax_backward_fast(int64_t rows, int64_t cols, const float* probs, const float* dprobs, float* dx);
void log_softmax_forward_fast(int64_t rows, int64_t cols, const float* x, float* logprobs);
void log_softmax_backward_fast(int64_t rows, int64_t cols, const float* logprobs, const float* dlogprobs,
                               float* dx);

// Whether a row loop is big enough (64K elements in all) for an OpenMP parallel region to pay off.
inline bool worth_threads(int64_t rows, int64_t cols) { return rows > 1 && rows * cols >= (1 << 16); }

// Row loops shared with the cross-entropy and attention kernels, inline so that each vectorises
// where it is called. A row's sums are float SIMD reductions (8 or 16 partial sums).

// max_j x[j]; -inf for an empty row or one masked entirely with -inf.
inline float row_max(const float* x, int64_t n) {
  constexpr float lowest = std::numeric_limits<float>::lowest();  // -FLT_MAX
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  // OpenMP starts each lane's copy of a max reduction at the type's "least representable value":
  // GCC takes -inf, clang -FLT_MAX. Under clang a row masked entirely with -inf would end at
  // -FLT_MAX, not -inf, and its callers would then divide 0 by 0 instead of taking the empty-row
  // path. So -FLT_MAX is checked once more (fully masked rows only; real scores never reach it).
  if (m == lowest) {
    for (int64_t j = 0; j < n; ++j)
      if (x[j] == lowest) return lowest;
    m = -std::numeric_limits<float>::infinity();
  }
  // The comparison skips NaN, so a row of NaN would look like a masked row (max -inf) and come out as
  // zeros: finite and wrong. Such a row's max is NaN instead, so NaN reaches the output (and anomaly
  // mode stops at this op). Rows with a finite max need no check: exp(NaN - max) is NaN there already.
  if (m == -std::numeric_limits<float>::infinity())
    for (int64_t j = 0; j < n; ++j)
      if (x[j] != x[j]) return x[j];
  return m;
}

// out[j] = exp(x[j] - shift); returns sum_j out[j]. out may be x.
inline float exp_shifted(const float* x, float shift, int64_t n, float* out) {
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) {
    out[j] = exp_fast(x[j] - shift);
    total += out[j];
  }
  return total;
}

// sum_j exp(x[j] - shift): with shift = max_j x[j], the sum inside a log-sum-exp.
inline float sum_exp_shifted(const float* x, float shift, int64_t n) {
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) total += exp_fast(x[j] - shift);
  return total;
}

}  // namespace tf::kernels

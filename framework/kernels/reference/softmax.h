// Reference softmax and log-softmax kernels over the rows of a (rows, cols) buffer, forward and
// backward: plain loops with std::exp, the oracle for kernels/cpu/softmax.h and the float64 path.
//
//   softmax:      probs[r, j]    = exp(x[r, j] - m_r) / sum_k exp(x[r, k] - m_r),  m_r = max_k x[r, k]
//   log_softmax:  logprobs[r, j] = x[r, j] - m_r - log sum_k exp(x[r, k] - m_r)
// Subtracting the row maximum changes nothing mathematically and keeps every exp in (0, 1], so
// nothing overflows. A row of all -inf has no maximum to subtract: it comes out NaN, as in PyTorch.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

namespace tf::kernels {

// A row's maximum m and sum_j exp(x[j] - m), in double: the stable log-sum-exp is m + log(total).
// Shared by the softmax, log-softmax and cross-entropy reference kernels.
struct RowExpSum {
  double max, total;
};
template <class T>
RowExpSum row_exp_sum(const T* x, int64_t cols) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < cols; ++j) m = x[j] > m ? x[j] : m;
  double total = 0;
  for (int64_t j = 0; j < cols; ++j) total += std::exp(x[j] - m);
  return {m, total};
}

template <class T>
void softmax_forward_reference(int64_t rows, int64_t cols, const T* x, T* probs);
// dx = probs * (dprobs - sum_j dprobs_j probs_j), row by row.
template <class T>
void softmax_backward_reference(int64_t rows, int64_t cols, const T* probs, const T* dprobs, T* dx);

template <class T>
void log_softmax_forward_reference(int64_t rows, int64_t cols, const T* x, T* logprobs);
// dx = dlogprobs - exp(logprobs) * sum_j dlogprobs_j, row by row.
template <class T>
void log_softmax_backward_reference(int64_t rows, int64_t cols, const T* logprobs, const T* dlogprobs, T* dx);

}  // namespace tf::kernels

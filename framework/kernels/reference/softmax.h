// Reference softmax and log-softmax kernels over the rows of a (rows, cols) buffer, forward and
// backward: plain loops with std::exp, the oracle for kernels/cpu/softmax.h and the float64 path.
//
//   softmax:      probs[r, j]    = exp(x[r, j] - m_r) / sum_k exp(x[r, k] - m_r),  m_r = max_k x[r, k]
//   log_softmax:  logprobs[r, j] = x[r, j] - m_r - log sum_k exp(x[r, k] - m_r)
// Subtracting the row maximum changes nothing mathematically and keeps every exp in (0, 1], so
// nothing overflows. A row of all -inf has no maximum to subtract: it comes out NaN, as in PyTorch.
#pragma once
#include <cstdint>

namespace tf::kernels {

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

// Reference softmax / log-softmax: one row at a time, sums accumulated in double.
#include "framework/kernels/reference/softmax.h"

#include <cmath>

namespace tf::kernels {

template <class T>
void softmax_forward_reference(int64_t rows, int64_t cols, const T* x, T* probs) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* pr = probs + r * cols;
    const auto [m, total] = row_exp_sum(xr, cols);
    for (int64_t j = 0; j < cols; ++j) pr[j] = static_cast<T>(std::exp(xr[j] - m) / total);
  }
}

template <class T>
void softmax_backward_reference(int64_t rows, int64_t cols, const T* probs, const T* dprobs, T* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = probs + r * cols;
    const T* dp = dprobs + r * cols;
    double dot = 0;
    for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(dp[j]) * p[j];
    for (int64_t j = 0; j < cols; ++j) dx[r * cols + j] = static_cast<T>(p[j] * (dp[j] - dot));
  }
}

template <class T>
void log_softmax_forward_reference(int64_t rows, int64_t cols, const T* x, T* logprobs) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const auto [m, total] = row_exp_sum(xr, cols);
    // (x - m) - log(total), not x - (m + log(total)): for large |m| the latter rounds log(total) away.
    const double log_total = std::log(total);
    for (int64_t j = 0; j < cols; ++j) logprobs[r * cols + j] = static_cast<T>((xr[j] - m) - log_total);
  }
}

template <class T>
void log_softmax_backward_reference(int64_t rows, int64_t cols, const T* logprobs, const T* dlogprobs, T* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* lp = logprobs + r * cols;
    const T* dlp = dlogprobs + r * cols;
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) total += dlp[j];
    for (int64_t j = 0; j < cols; ++j) dx[r * cols + j] = static_cast<T>(dlp[j] - std::exp(lp[j]) * total);
  }
}

#define TF_INSTANTIATE(T)                                                                     \
  template void softmax_forward_reference<T>(int64_t, int64_t, const T*, T*);                  \
  template void softmax_backward_reference<T>(int64_t, int64_t, const T*, const T*, T*);       \
  template void log_softmax_forward_reference<T>(int64_t, int64_t, const T*, T*);              \
  template void log_softmax_backward_reference<T>(int64_t, int64_t, const T*, const T*, T*);
TF_INSTANTIATE(float)
TF_INSTANTIATE(double)
#undef TF_INSTANTIATE

}  // namespace tf::kernels

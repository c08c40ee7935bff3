// Reference GELU and ReLU: the formulas as written in the papers, evaluated in the element type.
#include "framework/kernels/reference/activation.h"

#include <cmath>
#include <numbers>

namespace tf::kernels {

const char* gelu_approx_name(GeluApprox approx) { return approx == GeluApprox::tanh ? "tanh" : "erf"; }

namespace {

// GELU and its derivative at v, in the textbook forms.
//   tanh: g = 0.5 v (1 + tanh u),  u = k0 (v + k1 v^3)
//         g' = 0.5 (1 + tanh u) + 0.5 v (1 - tanh^2 u) k0 (1 + 3 k1 v^2)
//   erf:  g = v Phi(v),  g' = Phi(v) + v phi(v),  phi(v) = exp(-v^2 / 2) / sqrt(2 pi)
template <class T>
T gelu_value(GeluApprox approx, T v) {
  if (approx == GeluApprox::tanh) {
    const T k0 = static_cast<T>(std::sqrt(2.0 / std::numbers::pi)), k1 = static_cast<T>(0.044715);
    return T(0.5) * v * (T(1) + std::tanh(k0 * (v + k1 * v * v * v)));
  }
  return T(0.5) * v * (T(1) + std::erf(v / static_cast<T>(std::numbers::sqrt2)));
}

template <class T>
T gelu_derivative(GeluApprox approx, T v) {
  if (approx == GeluApprox::tanh) {
    const T k0 = static_cast<T>(std::sqrt(2.0 / std::numbers::pi)), k1 = static_cast<T>(0.044715);
    const T t = std::tanh(k0 * (v + k1 * v * v * v));
    return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * k0 * (T(1) + T(3) * k1 * v * v);
  }
  const T cdf = T(0.5) * (T(1) + std::erf(v / static_cast<T>(std::numbers::sqrt2)));
  const T pdf = std::exp(T(-0.5) * v * v) * static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return cdf + v * pdf;
}

}  // namespace

template <class T>
void gelu_forward_reference(GeluApprox approx, const T* x, const T* bias, int64_t rows, int64_t cols, T* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const T v = x[r * cols + c] + (bias ? bias[c] : T(0));
      y[r * cols + c] = gelu_value(approx, v);
    }
}

template <class T>
void gelu_backward_reference(GeluApprox approx, const T* x, const T* bias, const T* dy, int64_t rows,
                             int64_t cols, T* dx) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const T v = x[r * cols + c] + (bias ? bias[c] : T(0));
      dx[r * cols + c] = dy[r * cols + c] * gelu_derivative(approx, v);
    }
}

template <class T>
void relu_forward_reference(const T* x, int64_t n, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];  // written so NaN passes through
}

template <class T>
void relu_backward_reference(const T* y, const T* dy, int64_t n, T* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

#define TF_INSTANTIATE(T)                                                                              \
  template void gelu_forward_reference<T>(GeluApprox, const T*, const T*, int64_t, int64_t, T*);       \
  template void gelu_backward_reference<T>(GeluApprox, const T*, const T*, const T*, int64_t, int64_t, \
                                           T*);                                                        \
  template void relu_forward_reference<T>(const T*, int64_t, T*);                                      \
  template void relu_backward_reference<T>(const T*, const T*, int64_t, T*);
TF_INSTANTIATE(float)
TF_INSTANTIATE(double)
#undef TF_INSTANTIATE

}  // namespace tf::kernels

// Reference activation kernels: GELU (tanh and erf forms, optionally with a bias added first) and
// ReLU, as textbook loops on float and double. The oracle for kernels/cpu/activation.h and the
// float64 path.
//
// Shapes: R = rows, C = columns (the last axis); bias, when given, is (C) and added to every row.
// Backward kernels assign dx (activation gradients are assigned, see autograd/tape.h).
#pragma once
#include <cstdint>

namespace tf::kernels {

// Which closed form of GELU(x) = x Phi(x) (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units"):
//   erf:  0.5 x (1 + erf(x / sqrt 2))                                  (exact)
//   tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))            (their eq. for fast use; GPT-2's)
enum class GeluApprox { tanh, erf };
const char* gelu_approx_name(GeluApprox approx);  // "tanh" / "erf"

// y[r, c] = gelu(x[r, c] + bias[c]); bias may be null.                    x, y: (R, C)
template <class T>
void gelu_forward_reference(GeluApprox approx, const T* x, const T* bias, int64_t rows, int64_t cols, T* y);
// dx[r, c] = dy[r, c] * gelu'(x[r, c] + bias[c]); bias may be null.      x, dy, dx: (R, C)
template <class T>
void gelu_backward_reference(GeluApprox approx, const T* x, const T* bias, const T* dy, int64_t rows,
                             int64_t cols, T* dx);

// y = max(x, 0) (NaN propagates); dx = dy where y > 0, else 0 (the subgradient 0 at x = 0, as PyTorch).
template <class T>
void relu_forward_reference(const T* x, int64_t n, T* y);
template <class T>
void relu_backward_reference(const T* y, const T* dy, int64_t n, T* dx);

}  // namespace tf::kernels

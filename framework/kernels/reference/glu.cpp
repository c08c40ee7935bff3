// Reference gated linear units; the math is in glu.h.
#include "framework/kernels/reference/glu.h"

#include <cmath>

#include "framework/error.h"

namespace tf::kernels {

const char* feed_forward_kind_name(FeedForwardKind kind) { return kind == FeedForwardKind::gelu ? "gelu" : "swiglu"; }

namespace {

template <class T>
T sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));  // exp(-a) = inf for a very negative: 1 / inf = 0, as it should
}

void check_gated(FeedForwardKind kind) {
  TF_CHECK(gated(kind), "glu kernels: feed-forward kind '", feed_forward_kind_name(kind), "' has no gate");
}

}  // namespace

template <class T>
void glu_forward_reference(FeedForwardKind kind, const T* h, int64_t rows, int64_t width, T* y) {
  check_gated(kind);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const T a = h[r * 2 * width + c], b = h[r * 2 * width + width + c];
      y[r * width + c] = a * sigmoid(a) * b;  // SiLU(a) b
    }
}

template <class T>
void glu_backward_reference(FeedForwardKind kind, const T* h, const T* dy, int64_t rows, int64_t width, T* dh) {
  check_gated(kind);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const T a = h[r * 2 * width + c], b = h[r * 2 * width + width + c], g = dy[r * width + c];
      const T s = sigmoid(a);
      dh[r * 2 * width + c] = g * b * s * (T(1) + a * (T(1) - s));
      dh[r * 2 * width + width + c] = g * a * s;
    }
}

template void glu_forward_reference<float>(FeedForwardKind, const float*, int64_t, int64_t, float*);
template void glu_forward_reference<double>(FeedForwardKind, const double*, int64_t, int64_t, double*);
template void glu_backward_reference<float>(FeedForwardKind, const float*, const float*, int64_t, int64_t, float*);
template void glu_backward_reference<double>(FeedForwardKind, const double*, const double*, int64_t, int64_t,
                                             double*);

}  // namespace tf::kernels

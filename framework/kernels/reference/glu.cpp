// Reference gated linear units; the math is in glu.h.
#include "framework/kernels/reference/glu.h"

#include <cmath>

#include "framework/error.h"

namespace tf::kernels {

namespace {

void check_gated(FeedForwardKind kind) {
  TF_CHECK(gated(kind), "glu kernels: feed-forward kind '", feed_forward_kind_name(kind), "' has no gate");
}

}  // namespace

template <class T>
void glu_forward_reference(FeedForwardKind kind, const T* h, int64_t rows, int64_t width, T* y) {
  check_gated(kind);
  const auto act = feed_forward_row(kind).activation;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const T a = h[r * 2 * width + c], b = h[r * 2 * width + width + c];
      y[r * width + c] = static_cast<T>(act(a)) * b;
    }
}

template <class T>
void glu_backward_reference(FeedForwardKind kind, const T* h, const T* dy, int64_t rows, int64_t width, T* dh) {
  check_gated(kind);
  const FeedForwardKindRow& row = feed_forward_row(kind);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const T a = h[r * 2 * width + c], b = h[r * 2 * width + width + c], g = dy[r * width + c];
      dh[r * 2 * width + c] = g * b * static_cast<T>(row.derivative(a));
      dh[r * 2 * width + width + c] = g * static_cast<T>(row.activation(a));
    }
}

template void glu_forward_reference<float>(FeedForwardKind, const float*, int64_t, int64_t, float*);
template void glu_forward_reference<double>(FeedForwardKind, const double*, int64_t, int64_t, double*);
template void glu_backward_reference<float>(FeedForwardKind, const float*, const float*, int64_t, int64_t, float*);
template void glu_backward_reference<double>(FeedForwardKind, const double*, const double*, int64_t, int64_t,
                                             double*);

}  // namespace tf::kernels

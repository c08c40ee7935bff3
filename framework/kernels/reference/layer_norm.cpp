// Reference layer norm: two passes for the statistics (mean, then squared deviations, which does
// not cancel the way E[x^2] - E[x]^2 does), accumulating in the element type.
#include "framework/kernels/reference/layer_norm.h"

#include <cmath>

namespace tf::kernels {

template <class T>
void layer_norm_forward_reference(const T* x, const T* weight, const T* bias, int64_t rows, int64_t channels,
                                  double eps, T* y, T* mean, T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * channels;  // (C)
    T* yr = y + r * channels;        // (C)
    T sum = 0;
    for (int64_t c = 0; c < channels; ++c) sum += xr[c];
    const T m = sum / static_cast<T>(channels);
    T sq = 0;
    for (int64_t c = 0; c < channels; ++c) sq += (xr[c] - m) * (xr[c] - m);
    const T s = T(1) / std::sqrt(sq / static_cast<T>(channels) + static_cast<T>(eps));
    for (int64_t c = 0; c < channels; ++c) {
      const T xhat = (xr[c] - m) * s;
      yr[c] = (weight ? xhat * weight[c] : xhat) + (bias ? bias[c] : T(0));
    }
    mean[r] = m;
    rstd[r] = s;
  }
}

template <class T>
void layer_norm_backward_reference(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd,
                                   int64_t rows, int64_t channels, T* dx, T* dweight, T* dbias) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * channels;    // (C)
    const T* dyr = dy + r * channels;  // (C)
    const T m = mean[r], s = rstd[r];
    // Row means of g and of g * xhat, g = dy * weight.
    T mean_g = 0, mean_gxhat = 0;
    for (int64_t c = 0; c < channels; ++c) {
      const T xhat = (xr[c] - m) * s;
      const T g = weight ? dyr[c] * weight[c] : dyr[c];
      mean_g += g;
      mean_gxhat += g * xhat;
    }
    mean_g /= static_cast<T>(channels);
    mean_gxhat /= static_cast<T>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const T xhat = (xr[c] - m) * s;
      const T g = weight ? dyr[c] * weight[c] : dyr[c];
      if (dx) dx[r * channels + c] = s * (g - mean_g - xhat * mean_gxhat);
      if (dweight) dweight[c] += dyr[c] * xhat;
      if (dbias) dbias[c] += dyr[c];
    }
  }
}

template void layer_norm_forward_reference<float>(const float*, const float*, const float*, int64_t, int64_t,
                                                  double, float*, float*, float*);
template void layer_norm_forward_reference<double>(const double*, const double*, const double*, int64_t, int64_t,
                                                   double, double*, double*, double*);
template void layer_norm_backward_reference<float>(const float*, const float*, const float*, const float*,
                                                   const float*, int64_t, int64_t, float*, float*, float*);
template void layer_norm_backward_reference<double>(const double*, const double*, const double*, const double*,
                                                    const double*, int64_t, int64_t, double*, double*, double*);

}  // namespace tf::kernels

// Reference layer norm: two passes for the statistics (mean, then squared deviations, which does
// not cancel the way E[x^2] - E[x]^2 does), accumulating in the element type.
#include "framework/kernels/reference/layer_norm.h"

#include <cmath>

namespace tf::kernels {

template <class T>
void layer_norm_forward_reference(const LayerNormForwardArgs<T>& a) {
  const int64_t rows = a.rows, channels = a.channels;
  const T *weight = a.weight, *bias = a.bias;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = a.x + r * channels;  // (C)
    T* yr = a.y + r * channels;        // (C)
    if (a.residual) {  // h = x + residual, then the norm of h
      T* hr = a.sum + r * channels;
      for (int64_t c = 0; c < channels; ++c) hr[c] = xr[c] + a.residual[r * channels + c];
      xr = hr;
    }
    T sum = 0;
    for (int64_t c = 0; c < channels; ++c) sum += xr[c];
    const T m = a.kind == NormKind::rms ? T(0) : sum / static_cast<T>(channels);
    T sq = 0;
    for (int64_t c = 0; c < channels; ++c) sq += (xr[c] - m) * (xr[c] - m);
    const T s = T(1) / std::sqrt(sq / static_cast<T>(channels) + static_cast<T>(a.eps));
    for (int64_t c = 0; c < channels; ++c) {
      const T xhat = (xr[c] - m) * s;
      yr[c] = (weight ? xhat * weight[c] : xhat) + (bias ? bias[c] : T(0));
    }
    a.mean[r] = m;
    a.rstd[r] = s;
  }
}

template <class T>
void layer_norm_backward_reference(const LayerNormBackwardArgs<T>& a) {
  const int64_t rows = a.rows, channels = a.channels;
  const T *x = a.x, *dy = a.dy, *weight = a.weight, *mean = a.mean, *rstd = a.rstd;
  T *dx = a.dx, *dweight = a.dweight, *dbias = a.dbias;
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
    mean_g = a.kind == NormKind::rms ? T(0) : mean_g / static_cast<T>(channels);
    mean_gxhat /= static_cast<T>(channels);
    for (int64_t c = 0; c < channels; ++c) {
      const T xhat = (xr[c] - m) * s;
      const T g = weight ? dyr[c] * weight[c] : dyr[c];
      if (dx) dx[r * channels + c] = s * (g - mean_g - xhat * mean_gxhat) + (a.dsum ? a.dsum[r * channels + c] : T(0));
      if (dweight) dweight[c] += dyr[c] * xhat;
      if (dbias) dbias[c] += dyr[c];
    }
  }
}

template void layer_norm_forward_reference<float>(const LayerNormForwardArgs<float>&);
template void layer_norm_forward_reference<double>(const LayerNormForwardArgs<double>&);
template void layer_norm_backward_reference<float>(const LayerNormBackwardArgs<float>&);
template void layer_norm_backward_reference<double>(const LayerNormBackwardArgs<double>&);

}  // namespace tf::kernels

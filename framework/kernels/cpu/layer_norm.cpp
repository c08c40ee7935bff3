// Fast float32 layer norm; see cpu/layer_norm.h and, for the math, reference/layer_norm.h.
#include "framework/kernels/cpu/layer_norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/storage_pool.h"

namespace tf::kernels {

namespace {

// Below this many elements a parallel region costs more than the work (fork/join ~ microseconds).
constexpr int64_t kParallelMin = 1 << 14;

// y = xhat * weight + bias for one row, with the affine parts chosen at compile time.
template <bool kWeight, bool kBias>
void normalize_row(const float* x, const float* weight, const float* bias, int64_t channels, float m, float s,
                   float* y) {
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) {
    float v = (x[c] - m) * s;
    if constexpr (kWeight) v *= weight[c];
    if constexpr (kBias) v += bias[c];
    y[c] = v;
  }
}

// Layer norm of x, or of h = x + residual when residual is given (h then written to sum): the
// residual add is done row by row, so the row is in L1 when the statistics read it.
void forward_rows(const float* x, const float* residual, const float* weight, const float* bias, int64_t rows,
                  int64_t channels, double eps, bool center, float* sum, float* y, float* mean, float* rstd) {
#pragma omp parallel for schedule(static) if (rows * channels >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * channels;  // (C)
    if (residual) {
      const float* ar = residual + r * channels;  // (C)
      float* hr = sum + r * channels;             // (C)
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) hr[c] = xr[c] + ar[c];
      xr = hr;
    }
    // Row sums accumulate in double, so the statistics do not depend on how the compiler splits
    // the reduction (a sequential float sum of C values has error ~C ulp; seen under ASan builds).
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < channels; ++c) sum += xr[c];
    const float m = center ? static_cast<float>(sum / channels) : 0.0f;  // RMSNorm: mean taken as 0
    double sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < channels; ++c) sq += static_cast<double>(xr[c] - m) * (xr[c] - m);
    const float s = static_cast<float>(1.0 / std::sqrt(sq / channels + eps));
    float* yr = y + r * channels;
    if (weight && bias)
      normalize_row<true, true>(xr, weight, bias, channels, m, s, yr);
    else if (weight)
      normalize_row<true, false>(xr, weight, bias, channels, m, s, yr);
    else if (bias)
      normalize_row<false, true>(xr, weight, bias, channels, m, s, yr);
    else
      normalize_row<false, false>(xr, weight, bias, channels, m, s, yr);
    mean[r] = m;
    rstd[r] = s;
  }
}

// The layer norm backward, plus dsum (the gradient reaching h = x + residual directly) into dx when
// given: dx = dh = dsum + (the norm's share).
void backward_rows(const float* dy, const float* dsum, const float* x, const float* weight, const float* mean,
                   const float* rstd, int64_t rows, int64_t channels, bool center, float* dx, float* dweight,
                   float* dbias) {
  const bool params = dweight || dbias;
  const bool parallel = rows * channels >= kParallelMin;
  // dweight and dbias sum over rows: each block of rows sums its own, and the blocks are added in
  // order. Blocks come from the row count alone, so the bits do not depend on the thread count.
  const int64_t block_rows = std::max<int64_t>(16, (rows + 63) / 64), blocks = (rows + block_rows - 1) / block_rows;
  // (blocks, 2, C): each block's sums of dy * xhat and of dy.
  storage_pool::Scratch<float> partial(params ? static_cast<size_t>(blocks) * 2 * channels : 0, 0.0f);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t block = 0; block < blocks; ++block) {
    float* pdw = params ? partial.data() + block * 2 * channels : nullptr;  // (C)
    float* pdb = params ? pdw + channels : nullptr;                        // (C)
    for (int64_t r = block * block_rows; r < std::min(rows, (block + 1) * block_rows); ++r) {
      const float* xr = x + r * channels;    // (C)
      const float* dyr = dy + r * channels;  // (C)
      const float m = mean[r], s = rstd[r];
      double sum_g = 0, sum_gxhat = 0;  // in double, as in the forward
#pragma omp simd reduction(+ : sum_g, sum_gxhat)
      for (int64_t c = 0; c < channels; ++c) {
        const float g = weight ? dyr[c] * weight[c] : dyr[c];
        sum_g += g;
        sum_gxhat += g * ((xr[c] - m) * s);
      }
      const float mean_g = center ? static_cast<float>(sum_g / channels) : 0.0f,
                  mean_gxhat = static_cast<float>(sum_gxhat / channels);
      if (dx) {
        float* dxr = dx + r * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) {
          const float g = weight ? dyr[c] * weight[c] : dyr[c];
          dxr[c] = s * (g - mean_g - ((xr[c] - m) * s) * mean_gxhat);
        }
        if (dsum) {
          const float* dsr = dsum + r * channels;  // (C)
#pragma omp simd
          for (int64_t c = 0; c < channels; ++c) dxr[c] += dsr[c];
        }
      }
      if (params) {
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) {
          pdw[c] += dyr[c] * ((xr[c] - m) * s);
          pdb[c] += dyr[c];
        }
      }
    }
  }
  for (int64_t block = 0; block < blocks && params; ++block) {
    const float* pdw = partial.data() + block * 2 * channels;
    const float* pdb = pdw + channels;
    for (int64_t c = 0; c < channels; ++c) {
      if (dweight) dweight[c] += pdw[c];
      if (dbias) dbias[c] += pdb[c];
    }
  }
}

}  // namespace

void layer_norm_forward_fast(const LayerNormForwardArgs<float>& a) {
  forward_rows(a.x, a.residual, a.weight, a.bias, a.rows, a.channels, a.eps, a.kind == NormKind::layer, a.sum, a.y,
               a.mean, a.rstd);
}

void layer_norm_backward_fast(const LayerNormBackwardArgs<float>& a) {
  backward_rows(a.dy, a.dsum, a.x, a.weight, a.mean, a.rstd, a.rows, a.channels, a.kind == NormKind::layer, a.dx,
                a.dweight, a.dbias);
}

}  // namespace tf::kernels

// Fast float32 gated linear units; see cpu/glu.h, and reference/glu.h for the math.
#include "framework/kernels/cpu/glu.h"

#include "framework/error.h"
#include "framework/kernels/cpu/exp.h"

namespace tf::kernels {

namespace {

// Below this many elements a parallel region costs more than it saves (as for GELU).
constexpr int64_t kParallelMin = 1 << 15;

// sigmoid(a) = 1 / (1 + exp(-a)): exp_fast is +inf below a ~ -88, giving exactly 0, and NaN stays NaN.
#pragma omp declare simd
inline float sigmoid_fast(float a) { return 1.0f / (1.0f + exp_fast(-a)); }

}  // namespace

void glu_forward_fast(FeedForwardKind kind, const float* h, int64_t rows, int64_t width, float* y) {
  TF_CHECK(kind == FeedForwardKind::swiglu, "glu_forward_fast: SwiGLU only, got '", feed_forward_kind_name(kind), "'");
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = h + r * 2 * width, *b = a + width;
    float* yr = y + r * width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) yr[c] = a[c] * sigmoid_fast(a[c]) * b[c];
  }
}

void glu_backward_fast(FeedForwardKind kind, const float* h, const float* dy, int64_t rows, int64_t width, float* dh) {
  TF_CHECK(kind == FeedForwardKind::swiglu, "glu_backward_fast: SwiGLU only, got '", feed_forward_kind_name(kind), "'");
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = h + r * 2 * width, *b = a + width, *g = dy + r * width;
    float *da = dh + r * 2 * width, *db = da + width;
#pragma omp simd
    for (int64_t c = 0; c < width; ++c) {
      const float s = sigmoid_fast(a[c]);
      da[c] = g[c] * b[c] * s * (1.0f + a[c] * (1.0f - s));
      db[c] = g[c] * a[c] * s;
    }
  }
}

}  // namespace tf::kernels

// Fast float32 GELU and ReLU; see cpu/activation.h.
//
// Both GELU forms are rewritten so that no 1 + (something near -1) cancels for negative x:
//   tanh: 0.5 (1 + tanh u) = sigmoid(2u), so gelu = x / (1 + exp(-2u)), and 1 - tanh^2 u = 4 s (1 - s)
//   erf:  Phi(x) = erfc(-x / sqrt 2) / 2, taking erfc(z) = q(z) for z >= 0 from A&S 7.1.26 directly
// so the tails keep their relative precision and each element costs one exp.
#include "framework/kernels/cpu/activation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

namespace tf::kernels {

namespace {

// Below this many elements a parallel region costs more than it saves (a fork/join is a few
// microseconds; a GELU element a few nanoseconds).
constexpr int64_t kParallelMin = 1 << 15;
// Flat block size when there is no bias, so the element loop has a long vectorisable body.
constexpr int64_t kBlock = 4096;

// The clamp bounds of exp_approx, handed to it at run time rather than written as literals: GCC
// folds a literal bound through the select into the arithmetic after it, which leaves a float op
// on one side of a branch; under -ftrapping-math (GCC's default) it will not if-convert that, and
// the loop stays scalar. Reading the bounds through a volatile keeps them opaque.
struct ExpBounds {
  float lo, hi;
};
ExpBounds exp_bounds() {
  static volatile float lo = -87.0f, hi = 88.0f;  // 2^n stays a normal float for n in [-126, 127]
  return {lo, hi};
}

// exp(x) in float with only arithmetic, so it vectorises: x = n ln2 + r with |r| <= ln2 / 2,
// exp(r) by its Taylor series to degree 7 (truncation error r^8 / 8! < 6e-9, under a float ulp),
// and 2^n built from its exponent bits by a float -> int conversion (no integer SIMD needed, which
// AVX without AVX2 lacks). x is clamped to [-87, 88]: exp(-87) ~ 1.6e-38 stands in for anything
// smaller and exp(88) ~ 1.7e38 for anything larger, harmless where it is used here (1 / (1 + e),
// e * poly). NaN passes through (the polynomial is NaN whatever the exponent bits become).
inline float exp_approx(float x, ExpBounds b) {
  x = x < b.lo ? b.lo : x;
  x = x > b.hi ? b.hi : x;
  // n = round(x / ln 2): adding and removing 1.5 * 2^23 rounds to an integer (|x / ln 2| < 2^22).
  const float n = (x * std::numbers::log2e_v<float> + 12582912.0f) - 12582912.0f;
  // ln 2 split in two (Cody & Waite) so n * ln2_hi is exact and r keeps its low bits.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 5040 + r * (1.0f / 40320);
  p = 1.0f / 720 + r * p;
  p = 1.0f / 120 + r * p;
  p = 1.0f / 24 + r * p;
  p = 1.0f / 6 + r * p;
  p = 0.5f + r * p;
  p = 1.0f + r * p;
  p = 1.0f + r * p;
  const float bits = (n + 127.0f) * 8388608.0f;  // (n + 127) << 23, exact in float
  return p * std::bit_cast<float>(static_cast<int32_t>(bits));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

// erfc(z) for z >= 0 (Abramowitz & Stegun 1964, eq. 7.1.26), given e = exp(-z^2).
inline float erfc_nonneg(float z, float e) {
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return poly * e;
}

// Phi(v) given Phi(-|v|): 1 - tail for v >= 0, tail otherwise. Written as arithmetic on a 0/1
// select: `v >= 0 ? 1 - tail : tail` is not if-converted under -ftrapping-math (the subtraction would
// be speculated), so the loop would stay scalar.
inline float cdf_from_tail(float v, float tail) {
  return tail + (v >= 0.0f ? 1.0f : 0.0f) * (1.0f - 2.0f * tail);
}

// One contiguous run of n elements; bias (if kBias) is indexed from the run's start.
template <bool kBias>
void gelu_forward_run(GeluApprox approx, const float* x, const float* bias, int64_t n, float* y) {
  const ExpBounds eb = exp_bounds();
  if (approx == GeluApprox::tanh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      y[i] = v / (1.0f + exp_approx(-2.0f * u, eb));
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float z = std::abs(v) * kInvSqrt2;
      const float half_tail = 0.5f * erfc_nonneg(z, exp_approx(-z * z, eb));  // Phi(-|v|)
      y[i] = v * cdf_from_tail(v, half_tail);
    }
  }
}

template <bool kBias>
void gelu_backward_run(GeluApprox approx, const float* x, const float* bias, const float* dy, int64_t n,
                       float* dx) {
  const ExpBounds eb = exp_bounds();
  if (approx == GeluApprox::tanh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
      const float e = exp_approx(-2.0f * u, eb);
      const float s = 1.0f / (1.0f + e);  // 0.5 (1 + tanh u)
      const float one_minus_s = e * s;     // not 1 - s, which cancels as s -> 1
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      dx[i] = dy[i] * (s + 2.0f * v * s * one_minus_s * du);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float z = std::abs(v) * kInvSqrt2;
      const float e = exp_approx(-z * z, eb);  // exp(-v^2 / 2): also the Gaussian density's kernel
      const float half_tail = 0.5f * erfc_nonneg(z, e);
      const float cdf = cdf_from_tail(v, half_tail);
      dx[i] = dy[i] * (cdf + v * e * kInvSqrt2Pi);
    }
  }
}

// Calls run(offset, bias_offset_or_null, length) over (rows, cols): whole rows when there is a bias
// (it repeats per row), fixed flat blocks otherwise; in parallel when the tensor is large enough.
template <class Run>
void for_blocks(const float* bias, int64_t rows, int64_t cols, Run&& run) {
  const int64_t n = rows * cols;
  if (bias) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t r = 0; r < rows; ++r) run(r * cols, cols);
  } else {
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t b = 0; b < blocks; ++b) run(b * kBlock, std::min(kBlock, n - b * kBlock));
  }
}

}  // namespace

void gelu_forward_fast(GeluApprox approx, const float* x, const float* bias, int64_t rows, int64_t cols,
                       float* y) {
  for_blocks(bias, rows, cols, [&](int64_t offset, int64_t len) {
    if (bias)
      gelu_forward_run<true>(approx, x + offset, bias, len, y + offset);
    else
      gelu_forward_run<false>(approx, x + offset, nullptr, len, y + offset);
  });
}

void gelu_backward_fast(GeluApprox approx, const float* x, const float* bias, const float* dy, int64_t rows,
                        int64_t cols, float* dx) {
  for_blocks(bias, rows, cols, [&](int64_t offset, int64_t len) {
    if (bias)
      gelu_backward_run<true>(approx, x + offset, bias, dy + offset, len, dx + offset);
    else
      gelu_backward_run<false>(approx, x + offset, nullptr, dy + offset, len, dx + offset);
  });
}

void relu_forward_fast(const float* x, int64_t n, float* y) {
#pragma omp parallel for simd schedule(static) if (n >= 4 * kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void relu_backward_fast(const float* y, const float* dy, int64_t n, float* dx) {
#pragma omp parallel for simd schedule(static) if (n >= 4 * kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace tf::kernels

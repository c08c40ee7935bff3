// Fast float32 GELU and ReLU; see cpu/activation.h.
//
// Both GELU forms are rewritten so that no 1 + (something near -1) cancels for negative x:
//   tanh: 0.5 (1 + tanh u) = sigmoid(2u), so gelu = x / (1 + exp(-2u)), and 1 - tanh^2 u = 4 s (1 - s)
//   erf:  Phi(x) = erfc(-x / sqrt 2) / 2, taking erfc(z) = q(z) for z >= 0 from A&S 7.1.26 directly
// so the tails keep their relative precision and each element costs one exp (exp_fast, Note [fast exp]).
#include "framework/kernels/cpu/activation.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "framework/kernels/cpu/exp.h"

namespace tf::kernels {

namespace {

// Below this many elements a parallel region costs more than it saves (a fork/join is a few
// microseconds; a GELU element a few nanoseconds).
constexpr int64_t kParallelMin = 1 << 15;
// Flat block size when there is no bias, so the element loop has a long vectorisable body.
constexpr int64_t kBlock = 4096;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

// u = sqrt(2 / pi) (v + 0.044715 v^3), the argument of the tanh form's tanh.
inline float tanh_arg(float v) { return kSqrt2OverPi * (v + kCubic * v * v * v); }

// pick ? a : b, by bit masks on values already computed: GCC does not if-convert a `?:` whose arms
// are float arithmetic (under -ftrapping-math it will not speculate them), and the loop stays scalar.
inline float select(bool pick, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(pick);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) | (std::bit_cast<uint32_t>(b) & ~mask));
}

// erfc(z) for z >= 0 (Abramowitz & Stegun 1964, eq. 7.1.26), given e = exp(-z^2).
inline float erfc_nonneg(float z, float e) {
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return poly * e;
}

// Phi(v) given Phi(-|v|).
inline float cdf_from_tail(float v, float tail) { return select(v >= 0.0f, 1.0f - tail, tail); }

// One contiguous run of n elements; bias (if kBias) is indexed from the run's start.
template <bool kBias>
void gelu_forward_run(GeluApprox approx, const float* x, const float* bias, int64_t n, float* y) {
  if (approx == GeluApprox::tanh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      y[i] = v / (1.0f + exp_fast(-2.0f * tanh_arg(v)));  // exp is +inf below v ~ -10: v / inf = 0
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float z = std::abs(v) * kInvSqrt2;
      const float half_tail = 0.5f * erfc_nonneg(z, exp_fast(-z * z));  // Phi(-|v|)
      y[i] = v * cdf_from_tail(v, half_tail);
    }
  }
}

template <bool kBias>
void gelu_backward_run(GeluApprox approx, const float* x, const float* bias, const float* dy, int64_t n,
                       float* dx) {
  if (approx == GeluApprox::tanh) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float u = tanh_arg(v);
      // s = sigmoid(2u) = 0.5 (1 + tanh u) and 1 - s from e = exp(-2|u|) <= 1: the larger of the two is
      // 1 / (1 + e), the smaller e / (1 + e), so 1 - s never cancels as s -> 1, and nothing overflows
      // (exp(-2u) would be +inf for v < -10, making e s = inf * 0).
      const float e = exp_fast(-2.0f * std::abs(u));
      const float larger = 1.0f / (1.0f + e), smaller = e * larger;
      const float s = select(u >= 0.0f, larger, smaller);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
      dx[i] = dy[i] * (s + 2.0f * v * larger * smaller * du);  // s (1 - s) = larger * smaller
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = kBias ? x[i] + bias[i] : x[i];
      const float z = std::abs(v) * kInvSqrt2;
      const float e = exp_fast(-z * z);  // exp(-v^2 / 2): also the Gaussian density's kernel
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

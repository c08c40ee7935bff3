// exp_fast: the one branch-free float32 exponential of the fast kernels (softmax, cross-entropy,
// attention, GELU). GCC vectorises it inside `omp simd` loops; std::exp is a libm call per element.
//
// Note [fast exp]. Cody & Waite range reduction ("Software Manual for the Elementary Functions",
// 1980): x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, ln2 split in two parts so that
// n * ln2_hi is exact and r keeps its low bits. exp(r) by its Taylor series to degree 8 (truncation
// error (ln2 / 2)^9 / 9! < 2e-10, far below a float ulp), 2^n built in the exponent bits.
// n is rounded by adding 1.5 * 2^23 (the "magic number": the float's ulp is then 1, so the addition
// itself rounds to nearest, and the integer sits in the low mantissa bits).
// The range checks come last, as bit masks, after computing on the raw input (garbage bits out of
// range, but no UB: the exponent arithmetic is unsigned): x < -87 gives exactly 0 (the true value
// is below 1.7e-38), so masked (-inf) scores get probability 0; x > 88 gives +inf; NaN stays NaN.
// Why masks and not `?:` or a clamp of the input: GCC 12 folds a constant arm of a select into the
// arithmetic after it, which leaves a float op on one side of a branch; under -ftrapping-math (GCC's
// default) that is not if-converted, and the loop stays scalar.
//
// Measured against double exp over every float in [-87, 88]: at most 0.87 ulp (relative error
// 7.4e-8 = 1.24 * 2^-24). It replaced three private copies; their worst errors over every 31st
// float (this one's: 0.85 ulp): Cephes' degree-7 minimax polynomial with these masks, 1.01 ulp
// (softmax, cross-entropy); a degree-7 Taylor series, 0.91 ulp, whose `?:` clamps kept its loop
// scalar, 3.1 ns per element (attention); this polynomial with its input clamped to [-87, 88]
// instead of masked, so exp(-inf) = 1.6e-38 rather than 0 (GELU). The vectorised ones all cost
// 0.4 - 0.5 ns per element, within timing noise of each other (one core of the shared machine,
// AVX2, best of 7 runs over 4096 elements), against 4 ns for std::exp.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace tf::kernels {

// a * b + c rounded once where the CPU has fused multiply-add. GCC forms FMAs by itself only from
// -O2, so spelling them out keeps exp_fast's result, and the 0.87 ulp above, the same at every
// optimisation level (the sanitizer build compiles at -O1). Where there is no FMA, a libm fma call
// would be slower than the rounding it saves, so the plain expression stays.
#pragma omp declare simd
inline float mul_add(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

#pragma omp declare simd
inline float exp_fast(float x) {
  constexpr float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  constexpr float magic = 12582912.0f;             // 1.5 * 2^23
  const float shifted = mul_add(x, log2e, magic);  // round(x / ln2) in the low mantissa bits
  const float n = shifted - magic;
  const float r = mul_add(-n, ln2_lo, mul_add(-n, ln2_hi, x));
  float p = 1.0f / 40320;  // Horner: 1 + r (1 + r (1/2 + r (1/6 + ... + r / 8!)))
  p = mul_add(p, r, 1.0f / 5040);
  p = mul_add(p, r, 1.0f / 720);
  p = mul_add(p, r, 1.0f / 120);
  p = mul_add(p, r, 1.0f / 24);
  p = mul_add(p, r, 1.0f / 6);
  p = mul_add(p, r, 0.5f);
  p = mul_add(p, r, 1.0f);
  p = mul_add(p, r, 1.0f);  // exp(r)
  // 2^n: for x in [-87, 88], n + 127 lies in [1, 254], a normal float's exponent field.
  const uint32_t bits = (std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(magic) + 127u) << 23;
  const uint32_t result = std::bit_cast<uint32_t>(p * std::bit_cast<float>(bits));
  const uint32_t keep = 0u - static_cast<uint32_t>(!(x < -87.0f));  // all ones unless underflow (NaN kept)
  const uint32_t over = 0u - static_cast<uint32_t>(x > 88.0f);       // all ones on overflow
  return std::bit_cast<float>((result & keep & ~over) | (over & 0x7f800000u));  // 0x7f800000: +inf
}

}  // namespace tf::kernels

// exp_fast: a branch-free float32 exponential that GCC vectorises inside `omp simd` loops
// (std::exp is a libm call per element), for the softmax and cross-entropy kernels.
//
// Note [fast exp]. Cody-Waite range reduction, as in Cephes expf (Moshier, "Methods and Programs
// for Mathematical Functions", 1989): x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, ln2
// split in two parts so n * ln2 is subtracted exactly; exp(r) by Cephes' degree-7 minimax
// polynomial (relative error below 2 ulp on that interval); 2^n built in the exponent bits.
// n is rounded by adding 1.5 * 2^23 (the "magic number": the float's ulp is then 1, so the
// addition itself rounds to nearest, and the integer sits in the low mantissa bits).
// The range checks come last, as bit masks, after computing on the raw input (garbage bits out of
// range, but no UB: the exponent arithmetic is unsigned): x < -87 gives exactly 0 (the true value
// is below 1.7e-38), so masked (-inf) scores get probability 0; x > 88 gives +inf; NaN stays NaN.
// Why masks and not `?:` or a clamp of the input: GCC 12's partial redundancy elimination turns
// a select whose arm is constant into a branch, and a loop with a branch does not vectorise.
// Measured: max relative error 1.4 ulp (8.5e-8) over every float in [-87, 88].
#pragma once
#include <bit>
#include <cstdint>

namespace tf::kernels {

#pragma omp declare simd
inline float exp_fast(float x) {
  constexpr float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  const float shifted = x * log2e + magic;  // round(x / ln2) in the low mantissa bits
  const float n = shifted - magic;
  const float r = (x - n * ln2_hi) - n * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;  // exp(r)
  // 2^n: for x in [-87, 88], n + 127 lies in [1, 254], a normal float's exponent field.
  const uint32_t bits = (std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(magic) + 127u) << 23;
  const uint32_t result = std::bit_cast<uint32_t>(p * std::bit_cast<float>(bits));
  const uint32_t keep = 0u - static_cast<uint32_t>(!(x < -87.0f));  // all ones unless underflow (NaN kept)
  const uint32_t over = 0u - static_cast<uint32_t>(x > 88.0f);       // all ones on overflow
  return std::bit_cast<float>((result & keep & ~over) | (over & 0x7f800000u));  // 0x7f800000: +inf
}

}  // namespace tf::kernels

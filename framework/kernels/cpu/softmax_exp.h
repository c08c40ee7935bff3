// exp_fast: a branch-free float32 exponential that compilers vectorise inside `omp simd` loops
// (std::exp is a libm call per element), for the softmax and cross-entropy kernels.
//
// Note [fast exp]. Cody-Waite range reduction, as in Cephes expf (Moshier, "Methods and Programs
// for Mathematical Functions", 1989): x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, ln2
// split in two parts so n * ln2 is subtracted exactly; exp(r) by Cephes' degree-7 minimax
// polynomial (relative error below 2 ulp on that interval); 2^n built in the exponent bits.
// n is rounded by adding 1.5 * 2^23 (the "magic number": the float's ulp is then 1, so the
// addition itself rounds to nearest, and the integer sits in the low mantissa bits).
// Inputs below -87 (where exp underflows float's normal range) give exactly 0, which the
// max-subtracted softmax wants for masked (-inf) scores; inputs above 88 are clamped (the kernels
// only pass arguments <= 0); NaN stays NaN.
#pragma once
#include <bit>
#include <cstdint>

namespace tf::kernels {

#pragma omp declare simd
inline float exp_fast(float x) {
  constexpr float lo = -87.0f, hi = 88.0f;
  constexpr float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  float xc = x < lo ? lo : x;  // written as selects (not std::clamp) so NaN passes through
  xc = xc > hi ? hi : xc;
  const float shifted = xc * log2e + magic;  // round(x / ln2) in the low mantissa bits
  const float n = shifted - magic;
  const float r = (xc - n * ln2_hi) - n * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;  // exp(r)
  // 2^n: n + 127 in [1, 254] goes into the exponent field (unsigned arithmetic: no UB even for NaN).
  const uint32_t bits = (std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(magic) + 127u) << 23;
  const float result = p * std::bit_cast<float>(bits);
  return x < lo ? 0.0f : (x != x ? x : result);
}

}  // namespace tf::kernels

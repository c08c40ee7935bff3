// bfloat16: the top 16 bits of a float32 (sign, the 8 exponent bits, 7 mantissa bits), for the
// matmuls of train.matmul_precision: bf16 (Note [bfloat16 matmuls] in kernels/onednn.cpp).
#pragma once
#include <bit>
#include <cstdint>

namespace tf::kernels {

// Rounds to the nearest bfloat16, ties to even (IEEE 754's default), as AVX512_BF16's vcvtneps2bf16
// does, which the arrays' rounding uses where the CPU has it: so, like it, a subnormal float becomes
// a zero of its sign; a NaN stays a NaN (made quiet), infinities stay, and a float above the largest
// bfloat16 by half an ulp or more becomes infinity. Branch-free, so that loops vectorise.
inline uint16_t to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u, subnormal = (bits & 0x7f800000u) == 0;
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((nan ? bits | 0x00400000u : subnormal ? bits & 0x80000000u : rounded) >> 16);
}

inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// y[i] = to_bf16(x[i]); and the same rounding kept as float32 (x rounded to bfloat16's precision).
void round_to_bf16(const float* x, uint16_t* y, int64_t n);
void round_to_bf16(const float* x, float* y, int64_t n);

// True when oneDNN multiplies bfloat16 in hardware on this CPU (AVX512_BF16 or AMX); elsewhere
// train.matmul_precision: bf16 rounds the operands and multiplies them in float32 (the same rounding,
// slower than plain float32).
bool native_bf16();

// True when bfloat16 matmuls are native here and also faster: a product of a small model's size,
// timed both ways once per process (Note [when bf16 pays] in bf16.cpp). On Zen 5 a bf16 matmul runs
// at 1.8-2x float32; on a Xeon without AMX at 0.55-0.65x. train.matmul_precision: auto follows it.
bool bf16_faster();

// bf16_faster's timings (seconds of the same product in float32 and in bf16); zeros where the CPU
// has no bf16 instructions (nothing is timed there).
struct Bf16Timing {
  double fp32_seconds = 0, bf16_seconds = 0;
};
const Bf16Timing& bf16_timing();

// The rule bf16_faster applies to its timings: bf16 must take less than kBf16Margin of fp32's time,
// so that near a tie, where timing noise could flip the choice from run to run, fp32 stays.
constexpr double kBf16Margin = 0.9;
bool bf16_pays(double fp32_seconds, double bf16_seconds);

}  // namespace tf::kernels

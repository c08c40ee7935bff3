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

// True when oneDNN multiplies bfloat16 in hardware on this CPU (AVX512_BF16 or AMX): there a bf16
// matmul runs at 1.7-1.9x float32; elsewhere train.matmul_precision: bf16 rounds the operands and
// multiplies them in float32 (the same rounding, slower than plain float32), and `auto` keeps fp32.
bool native_bf16();

}  // namespace tf::kernels

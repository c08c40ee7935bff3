// Rounding float32 to bfloat16 over arrays; whether this CPU multiplies bfloat16 in hardware.
#include "framework/kernels/bf16.h"

#include <dnnl.hpp>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace tf::kernels {

namespace {
// Below this many elements one thread rounds (a fork would cost more than the loop).
constexpr int64_t kParallelRounding = int64_t{1} << 16;
}

void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
  int64_t done = 0;
#if defined(__AVX512BF16__)
  // One instruction rounds 32 floats. The integer arithmetic of to_bf16, vectorised by the compiler,
  // took 9.5% of the demo's bf16 training step (perf, Zen 5); this loop 6.4%, most of it its loads.
  const int64_t blocks = n / 32;
#pragma omp parallel for schedule(static) if (n >= kParallelRounding)
  for (int64_t i = 0; i < blocks; ++i) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 32 * i + 16), _mm512_loadu_ps(x + 32 * i));
    _mm512_storeu_si512(y + 32 * i, reinterpret_cast<const __m512i&>(pair));
  }
  done = blocks * 32;
#endif
#pragma omp parallel for simd schedule(static) if (n - done >= kParallelRounding)
  for (int64_t i = done; i < n; ++i) y[i] = to_bf16(x[i]);
}

void round_to_bf16(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelRounding)
  for (int64_t i = 0; i < n; ++i) y[i] = from_bf16(to_bf16(x[i]));
}

bool native_bf16() {
  // The ISA values are nested bit masks: every ISA's bits include those of the ones below it.
  static const bool native = [] {
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return native;
}

}  // namespace tf::kernels

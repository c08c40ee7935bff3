// Rounding float32 to bfloat16 over arrays; whether this CPU multiplies bfloat16 in hardware, and
// whether doing so is faster than float32 here.
#include "framework/kernels/bf16.h"

#include <algorithm>
#include <chrono>
#include <dnnl.hpp>
#include <limits>
#include <vector>

#include "framework/kernels/matmul.h"

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

bool bf16_pays(double fp32_seconds, double bf16_seconds) { return bf16_seconds < kBf16Margin * fp32_seconds; }

// Note [when bf16 pays]: AVX512_BF16's vdpbf16ps does two multiply-adds per 32-bit lane, but a CPU may
// issue it at half the rate of its float32 FMAs. On Zen 5 the demo's products ran at 1.8-2x float32,
// rounding included; on a Xeon of model 207 without AMX (a VM that shows AVX512_BF16 but not AMX,
// so oneDNN 2.6 takes brg:avx512_core_bf16) they ran at 0.55-0.65x, and the demo's step at 0.67x
// (docs/performance.md, "bfloat16 matmuls"). The instruction set cannot tell these apart; a
// stopwatch can. A product of the demo's size, one thread's half of its batch, is timed both ways,
// alternated (best of three rounds each, after one to plan and warm up), once per process: ~20 ms.
const Bf16Timing& bf16_timing() {
  static const Bf16Timing timing = [] {
    if (!native_bf16()) return Bf16Timing{};
    const MatmulDims d{.m = 1024, .n = 512, .k = 128};
    std::vector<float> a(d.m * d.k), b(d.k * d.n), c(d.m * d.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
    const auto seconds = [&](bool bf16) {
      const Bf16MatmulScope scope(bf16);
      const auto start = std::chrono::steady_clock::now();
      for (int rep = 0; rep < 4; ++rep) matmul_onednn(d, a.data(), b.data(), c.data());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    seconds(false);
    seconds(true);
    double fp32 = std::numeric_limits<double>::infinity(), bf16 = fp32;
    for (int round = 0; round < 3; ++round) {
      fp32 = std::min(fp32, seconds(false));
      bf16 = std::min(bf16, seconds(true));
    }
    return Bf16Timing{fp32, bf16};
  }();
  return timing;
}

bool bf16_faster() {
  const Bf16Timing& t = bf16_timing();
  return native_bf16() && bf16_pays(t.fp32_seconds, t.bf16_seconds);
}

}  // namespace tf::kernels

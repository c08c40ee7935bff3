// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011, "Parallel random numbers: as
// easy as 1, 2, 3"). A draw is a pure function of (seed, counter), so a generator's whole state is
// two integers: runs are reproducible, resumable from a checkpoint, and parallel loops can draw
// element i from counter base + i without sharing state.
//
//   Rng rng(42);
//   double u = rng.uniform();                 // [0, 1)
//   Tensor w = randn({64, 32}, rng, 0.02);    // normal(0, 0.02)
#pragma once
#include <cstdint>

#include "framework/sanitize.h"
#include "framework/tensor.h"

namespace tf {

// Four 32-bit random words for (key, counter): ten rounds of two 32x32 -> 64-bit products. Defined
// here so that a loop of draws (dropout) can inline it. It touches registers only, so it runs outside
// the sanitizers' instrumentation (Note [uninstrumented micro-kernels] in framework/sanitize.h): under
// AddressSanitizer and UBSan its round state was spilled and checked, 23% of a dropout run's time.
struct PhiloxWords {
  uint32_t word[4];  // a plain array: std::array's operator[] is an instrumented call, not inlined here
};
TF_UNINSTRUMENTED inline PhiloxWords philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32),
           c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(M0) * c0, p1 = static_cast<uint64_t>(M1) * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(p1);
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(p0);
    k0 += W0;
    k1 += W1;
  }
  return {c0, c1, c2, c3};
}

// Uniform float in [0, 1) from the (seed, index)-th draw: for parallel kernels such as dropout.
TF_UNINSTRUMENTED inline double uniform_at(uint64_t seed, uint64_t index) {
  const PhiloxWords w = philox4x32(seed, 0, index);
  return (static_cast<uint64_t>(w.word[0]) << 21 ^ w.word[1]) * 0x1.0p-53;
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t counter = 0) : seed_(seed), counter_(counter) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }  // with seed(): the state to save and restore
  void set_counter(uint64_t c) { counter_ = c; }

  uint64_t next_u64();
  double uniform();                                 // [0, 1)
  double normal();                                  // standard normal (Box-Muller)
  int64_t uniform_int(int64_t n);                   // [0, n)
  Rng fork(uint64_t stream) const;                  // an independent generator derived from this one

 private:
  uint64_t seed_, counter_;
};

Tensor randn(const Shape& shape, Rng& rng, double std = 1.0, DType dtype = DType::f32);
Tensor rand_uniform(const Shape& shape, Rng& rng, double low, double high, DType dtype = DType::f32);

}  // namespace tf

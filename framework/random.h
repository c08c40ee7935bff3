// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011, "Parallel random numbers: as
// easy as 1, 2, 3"). A draw is a pure function of (seed, counter), so a generator's whole state is
// two integers: runs are reproducible, resumable from a checkpoint, and parallel loops can draw
// element i from counter base + i without sharing state.
//
//   Rng rng(42);
//   double u = rng.uniform();                 // [0, 1)
//   Tensor w = randn({64, 32}, rng, 0.02);    // normal(0, 0.02)
#pragma once
#include <array>
#include <cstdint>

#include "framework/tensor.h"

namespace tf {

// Four 32-bit random words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// Uniform float in [0, 1) from the (seed, index)-th draw: for parallel kernels such as dropout.
inline double uniform_at(uint64_t seed, uint64_t index) {
  const auto w = philox4x32(seed, 0, index);
  return (static_cast<uint64_t>(w[0]) << 21 ^ w[1]) * 0x1.0p-53;
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

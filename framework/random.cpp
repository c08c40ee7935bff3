// Philox4x32-10 and the distributions built on it.
#include "framework/random.h"

#include <cmath>
#include <numbers>

namespace tf {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  std::array<uint32_t, 4> c{static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                            static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(M0) * c[0], p1 = static_cast<uint64_t>(M1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

uint64_t Rng::next_u64() {
  const auto w = philox4x32(seed_, 0x5eed, counter_++);
  return static_cast<uint64_t>(w[0]) << 32 | w[1];
}

double Rng::uniform() { return (next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Rng::uniform_int(int64_t n) {
  TF_CHECK(n > 0, "uniform_int: n must be positive, got ", n);
  return static_cast<int64_t>(uniform() * static_cast<double>(n)) % n;
}

Rng Rng::fork(uint64_t stream) const {
  const auto w = philox4x32(seed_ ^ 0xf0f0f0f0f0f0f0f0ull, stream, counter_);
  return Rng(static_cast<uint64_t>(w[0]) << 32 | w[1]);
}

Tensor randn(const Shape& shape, Rng& rng, double std, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(std * rng.normal());
  });
  return t;
}

Tensor rand_uniform(const Shape& shape, Rng& rng, double low, double high, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(low + (high - low) * rng.uniform());
  });
  return t;
}

}  // namespace tf

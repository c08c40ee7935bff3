// The distributions built on Philox4x32-10 (philox4x32 itself is inline, in framework/random.h).
#include "framework/random.h"

#include <cmath>
#include <numbers>

namespace tf {

uint64_t Rng::next_u64() {
  const PhiloxWords w = philox4x32(seed_, 0x5eed, counter_++);
  return static_cast<uint64_t>(w.word[0]) << 32 | w.word[1];
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
  const PhiloxWords w = philox4x32(seed_ ^ 0xf0f0f0f0f0f0f0f0ull, stream, counter_);
  return Rng(static_cast<uint64_t>(w.word[0]) << 32 | w.word[1]);
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

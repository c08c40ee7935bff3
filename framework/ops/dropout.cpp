// Dropout, forward and backward side by side. Both are the same kernel: with the mask fixed by the
// seed, y = x * mask / (1 - p) is linear in x, so dx = dy * mask / (1 - p).
//
// Note [dropout mask recomputed]: the backward draws the mask again from (seed, i) instead of
// saving it. A saved mask would hold one value per element from the forward until the backward,
// at every dropout site (the largest being attention probabilities, (B, H, T, T)), and the node
// would own it. Recomputing is exact, because a counter-based draw depends only on its (seed,
// index), not on generator state or on how the loop was split across threads; it costs a second
// Philox draw per element. That draw dominates dropout: ~15 ns per element per thread (thread CPU
// time, 4M elements, AVX machine, when philox4x32 was still an out-of-line call; it is inline now),
// against < 1 ns for the multiply; a hand-vectorised 16-lane Philox measured only 1.3x faster without
// AVX2, so the plain loop stays.
#include "framework/ops/dropout.h"

#include <cmath>

#include "framework/autograd/tape.h"
#include "framework/random.h"

namespace tf::ops {

namespace {

// out[i] = 0 if uniform_at(seed, i) < p, else in[i] / (1 - p). One loop for every dtype: the draw
// dominates, and the result does not depend on the split, so it is both reference and fast path.
// Uninstrumented, its spans checked whole by `masked` (Note [uninstrumented micro-kernels]).
template <class T>
TF_UNINSTRUMENTED void apply_dropout_mask(const T* in, int64_t n, double p, uint64_t seed, T* out) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static) if (n >= (1 << 14))
  for (int64_t i = 0; i < n; ++i) out[i] = uniform_at(seed, static_cast<uint64_t>(i)) < p ? T(0) : in[i] * scale;
}

Tensor masked(const Tensor& in, double p, uint64_t seed) {
  Tensor out = Tensor::empty(in.shape(), in.dtype());
  dispatch(in.dtype(), [&](auto zero) {
    using T = decltype(zero);
    check_addressable(in.data<T>(), sizeof(T) * in.numel());
    check_addressable(out.data<T>(), sizeof(T) * in.numel());
    apply_dropout_mask<T>(in.data<T>(), in.numel(), p, seed, out.data<T>());
  });
  return out;
}

struct DropoutNode : Node {
  GradRef x;  // only so its gradient can be accumulated; the mask is redrawn (Note [dropout mask recomputed])
  double p;
  uint64_t seed;
  const char* op_name() const override { return "dropout"; }
  void backward() override { accumulate_grad(x, masked(outputs[0].grad(), p, seed)); }
};

}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  TF_CHECK(p >= 0.0 && p < 1.0, "dropout: probability p must be in [0, 1), got ", p, " for ", x.describe());
  check_floating("dropout", x);
  if (p == 0.0) return x;
  Tensor y = masked(x, p, seed);
  if (needs_grad(x)) {
    auto node = std::make_unique<DropoutNode>();
    node->x = GradRef(x);
    node->p = p;
    node->seed = seed;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace tf::ops

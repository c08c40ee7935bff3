// Inverted dropout (Srivastava et al. 2014): during training each element is kept with
// probability 1 - p and scaled by 1 / (1 - p), so evaluation (p = 0, or no dropout call) needs no
// rescaling. Which elements are dropped is a pure function of (seed, flat index): element i is
// dropped iff tf::uniform_at(seed, i) < p (counter-based Philox, framework/random.h), so a run is
// reproducible, resumable, and independent of the thread count. Pass a fresh seed per call (e.g.
// rng.next_u64() from the layer's generator); the same seed gives the same mask.
//
//   Tensor h = ops::dropout(attn_probs, 0.1, rng.next_u64());   // (B, H, T, T)
#pragma once
#include <cstdint>

#include "framework/tensor.h"

namespace tf::ops {

// p in [0, 1). p == 0 returns x itself (no copy, nothing recorded).
Tensor dropout(const Tensor& x, double p, uint64_t seed);

}  // namespace tf::ops

// Fast float32 reduction over the middle axis; see reduce.h.
#include "framework/kernels/cpu/reduce.h"

#include <algorithm>

namespace tf::kernels {

void reduce_sum_fast(const ReduceDims& d, const float* x, float* out) {
  // Row after row onto the (inner) sums, which stay in L1: the inner loop vectorises and x streams
  // through once. One thread: see reduce.h.
  for (int64_t o = 0; o < d.outer; ++o) {
    float* sums = out + o * d.inner;
    std::fill(sums, sums + d.inner, 0.0f);
    for (int64_t r = 0; r < d.reduce; ++r) {
      const float* row = x + (o * d.reduce + r) * d.inner;
#pragma omp simd
      for (int64_t i = 0; i < d.inner; ++i) sums[i] += row[i];
    }
  }
}

}  // namespace tf::kernels

// Fast float32 sum over the middle axis of (outer, reduce, inner) blocks: the bias gradients of
// linear and bias_gelu (1, rows, C). Same contract as kernels/reference/reduce.h with scale 1,
// which it is tested against (tests/framework/reduce_test).
//
// One thread, row after row onto the sums: a bias gradient is memory-bound and small (1-4 MB at the
// recipes' sizes). Measured at (2048, 128 / 384 / 512), best of 200, machine under load: this loop
// 28 / 83 / 73 us against 37 / 99 / 120 us for a version that split the columns over two OpenMP
// threads. Accumulates in float (the reference uses double): each addition rounds once, so the
// error is at most ~rows * 2^-24 * sum |x| per column.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/reduce.h"

namespace tf::kernels {

void reduce_sum_fast(const ReduceDims& d, const float* x, float* out);

}  // namespace tf::kernels

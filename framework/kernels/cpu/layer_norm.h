// Fast float32 layer norm: OpenMP over rows, vectorised loops along the channels. Same contract as
// kernels/reference/layer_norm.h, which it is tested against (tests/framework/layer_norm_test).
//
// The statistics take two passes over the row (mean, then squared deviations): the row is in L1 by
// then, so the second pass is nearly free, and it does not lose the variance to cancellation when
// |mean| >> std as the one-pass E[x^2] - mean^2 does in float. Measured, f32 (8192, 512), one
// thread, CPU time, best of 9 (AVX machine): forward 4.0 ms two-pass vs 3.8 ms one-pass vs 10.6 ms
// for the float32 reference kernel; backward 5.8 ms vs 12.4 ms for the reference.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/layer_norm.h"

namespace tf::kernels {

// With a residual, h = x + residual is formed row by row, so h is not read back from memory.
void layer_norm_forward_fast(const LayerNormForwardArgs<float>& a);
// dweight / dbias partial sums are kept per block of rows (blocks from the row count alone) and
// added in block order, so the result is the same for any thread count.
void layer_norm_backward_fast(const LayerNormBackwardArgs<float>& a);

}  // namespace tf::kernels

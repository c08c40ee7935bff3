// Reference reduction kernels over one (outer, reduce, inner) block: the oracle and the only path
// (reductions are memory-bound and off the hot path of a training step; the contiguous inner loop
// vectorises as it is).
//
//   forward:   out[o, i]   = scale * sum_r x[o, r, i]      x: (outer, reduce, inner), out: (outer, inner)
//   backward:  dx[o, r, i] = scale * dout[o, i]
//
// A reduction over several non-adjacent axes is a sequence of such blocks (see ops/reduce.cpp).
#pragma once
#include <cstdint>

namespace tf::kernels {

struct ReduceDims {
  int64_t outer = 1, reduce = 1, inner = 1;
};

// Accumulates in double, so the float32 result is the correctly rounded sum up to one rounding.
template <class T>
void reduce_sum_reference(const ReduceDims& d, const T* x, T* out, double scale);

template <class T>
void reduce_sum_backward_reference(const ReduceDims& d, const T* dout, T* dx, double scale);

}  // namespace tf::kernels

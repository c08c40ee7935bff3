// NumPy broadcasting: the result shape of two operands, per-operand strides over that shape, and
// sum_to_shape, which folds a gradient back onto an operand that was broadcast.
#pragma once
#include <array>

#include "framework/tensor.h"

namespace tf::ops {

// Result shape of broadcasting a with b (align trailing axes; a size-1 axis stretches).
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Element strides of `operand` seen through `out` (0 on broadcast axes), padded to out's rank.
std::array<int64_t, Shape::kMaxRank> broadcast_strides(const Shape& operand, const Shape& out);

// Sums `grad` (shaped like the broadcast result) over the axes along which `target` was broadcast.
// Not recorded on the tape: backward functions use it.
Tensor sum_to_shape(const Tensor& grad, const Shape& target);

// Calls f(out_index, a_index, b_index) for every element of `out`, row-major.
template <class F>
void for_each_broadcast(const Shape& out, const std::array<int64_t, Shape::kMaxRank>& sa,
                        const std::array<int64_t, Shape::kMaxRank>& sb, F&& f) {
  const int rank = out.rank();
  const int64_t n = out.numel();
  if (n == 0) return;
  if (rank == 0) return f(int64_t{0}, int64_t{0}, int64_t{0});
  std::array<int64_t, Shape::kMaxRank> index{};
  const int64_t inner = out[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
  int64_t oa = 0, ob = 0;
  for (int64_t o = 0; o < n; o += inner) {
    for (int64_t j = 0; j < inner; ++j) f(o + j, oa + j * ia, ob + j * ib);
    // Odometer over the outer axes.
    for (int axis = rank - 2; axis >= 0; --axis) {
      oa += sa[axis];
      ob += sb[axis];
      if (++index[axis] < out[axis]) break;
      oa -= sa[axis] * out[axis];
      ob -= sb[axis] * out[axis];
      index[axis] = 0;
    }
  }
}

}  // namespace tf::ops

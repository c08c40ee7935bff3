// Broadcast shapes, strides and the gradient fold sum_to_shape.
#include "framework/ops/broadcast.h"

namespace tf::ops {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;  // built in place: every binary op calls this, and a Shape keeps its dims inline
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    TF_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
             " cannot be broadcast (axis ", i - rank, ": ", da, " vs ", db, ")");
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

std::array<int64_t, Shape::kMaxRank> broadcast_strides(const Shape& operand, const Shape& out) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = out.rank() - 1; i >= 0; --i) {
    const int io = operand.rank() - out.rank() + i;
    const int64_t d = io >= 0 ? operand[io] : 1;
    strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

Tensor sum_to_shape(const Tensor& grad, const Shape& target) {
  if (grad.shape() == target) return grad;
  Tensor out = Tensor::zeros(target, grad.dtype());
  const auto st = broadcast_strides(target, grad.shape());
  const std::array<int64_t, Shape::kMaxRank> dense = broadcast_strides(grad.shape(), grad.shape());
  dispatch(grad.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* g = grad.data<T>();
    T* o = out.data<T>();
    for_each_broadcast(grad.shape(), st, dense, [&](int64_t, int64_t it, int64_t ig) { o[it] += g[ig]; });
  });
  return out;
}

}  // namespace tf::ops

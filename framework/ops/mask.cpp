// masked_fill, forward and backward side by side, and causal_mask.
//
// The backward of masked_fill is masked_fill of the gradient with 0: filled positions no longer
// depend on x. One loop serves every dtype: a select per element, memory-bound.
#include "framework/ops/mask.h"

#include "framework/autograd/tape.h"
#include "framework/ops/broadcast.h"

namespace tf::ops {

namespace {

// out = value where mask != 0, else in; mask broadcast to in's shape (checked by the caller).
Tensor fill_where(const Tensor& in, const Tensor& mask, double value) {
  Tensor out = Tensor::empty(in.shape(), in.dtype());
  const auto s_in = broadcast_strides(in.shape(), in.shape()), s_mask = broadcast_strides(mask.shape(), in.shape());
  dispatch(in.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = in.data<T>();
    const T* m = mask.data<T>();
    T* y = out.data<T>();
    const T v = static_cast<T>(value);
    for_each_broadcast(in.shape(), s_in, s_mask,
                       [&](int64_t o, int64_t i, int64_t j) { y[o] = m[j] != T(0) ? v : x[i]; });
  });
  return out;
}

struct MaskedFillNode : Node {
  GradRef x;     // only so its gradient can be accumulated
  Tensor mask;  // saved: where the gradient is cut
  const char* op_name() const override { return "masked_fill"; }
  void backward() override { accumulate_grad(x, fill_where(outputs[0].grad(), mask, 0.0)); }
};

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_floating("masked_fill", x);
  TF_CHECK(mask.dtype() == x.dtype(), "masked_fill: mask ", mask.describe(), " must have the dtype of x ",
           x.describe());
  TF_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(), "masked_fill: mask ",
           mask.describe(), " would broadcast x ", x.describe(), " to a larger shape");
  Tensor y = fill_where(x, mask, value);
  if (needs_grad(x)) {
    auto node = std::make_unique<MaskedFillNode>();
    node->x = GradRef(x);
    node->mask = mask;
    record(std::move(node), {y});
  }
  return y;
}

Tensor causal_mask(int64_t t_q, int64_t t_k, DType dtype) {
  TF_CHECK(t_q >= 0 && t_q <= t_k, "causal_mask: need 0 <= t_q <= t_k (queries are the last t_q of t_k "
           "positions, so each sees at least itself), got t_q ", t_q, ", t_k ", t_k);
  Tensor mask = Tensor::empty({t_q, t_k}, dtype);  // (t_q, t_k)
  const int64_t offset = t_k - t_q;                // query i sits at key position i + offset
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* m = mask.data<T>();
    for (int64_t i = 0; i < t_q; ++i)
      for (int64_t j = 0; j < t_k; ++j) m[i * t_k + j] = j > i + offset ? T(1) : T(0);
  });
  return mask;
}

}  // namespace tf::ops

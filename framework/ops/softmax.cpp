// softmax and log_softmax, forward and backward side by side, over kernels/reference/softmax.h
// (float64, and float32 under ReferenceKernelsGuard) and kernels/cpu/softmax.h (float32).
//
// Both backwards need only the op's own output, so that is what the nodes save:
//   softmax      y = softmax(x):     dx = y * (dy - sum_j dy_j y_j)
//   log_softmax  y = log_softmax(x): dx = dy - softmax(x) * sum_j dy_j,   softmax(x) = exp(y)
#include "framework/ops/softmax.h"

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/softmax.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/softmax.h"

namespace tf::ops {

namespace {

struct Rows {
  int64_t rows, cols;  // x viewed as (rows, cols), cols = the last axis
};

Rows as_rows(const char* op, const Tensor& x) {
  TF_CHECK(x.rank() >= 1, op, ": needs at least one axis, got ", x.describe());
  const int64_t cols = x.dim(-1);
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

struct SoftmaxNode : Node {
  GradRef x;      // not saved for its values: only its gradient
  Tensor probs;  // saved: the output, (..., C)
  const char* op_name() const override { return "softmax"; }
  void backward() override {
    const Tensor dprobs = outputs[0].grad();
    const Rows s = as_rows("softmax", probs);
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (kernels::use_fast<T>())
        kernels::softmax_backward_fast(s.rows, s.cols, probs.data<float>(), dprobs.data<float>(), dx.data<float>());
      else
        kernels::softmax_backward_reference<T>(s.rows, s.cols, probs.data<T>(), dprobs.data<T>(), dx.data<T>());
    });
    accumulate_grad(x, std::move(dx));
  }
};

struct LogSoftmaxNode : Node {
  GradRef x;         // not saved for its values: only its gradient
  Tensor logprobs;  // saved: the output, (..., C)
  const char* op_name() const override { return "log_softmax"; }
  void backward() override {
    const Tensor dlogprobs = outputs[0].grad();
    const Rows s = as_rows("log_softmax", logprobs);
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (kernels::use_fast<T>())
        kernels::log_softmax_backward_fast(s.rows, s.cols, logprobs.data<float>(), dlogprobs.data<float>(),
                                           dx.data<float>());
      else
        kernels::log_softmax_backward_reference<T>(s.rows, s.cols, logprobs.data<T>(), dlogprobs.data<T>(),
                                                   dx.data<T>());
    });
    accumulate_grad(x, std::move(dx));
  }
};

}  // namespace

Tensor softmax(const Tensor& x) {
  const Rows s = as_rows("softmax", x);
  Tensor probs = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::softmax_forward_fast(s.rows, s.cols, x.data<float>(), probs.data<float>());
    else
      kernels::softmax_forward_reference<T>(s.rows, s.cols, x.data<T>(), probs.data<T>());
  });
  if (needs_grad(x)) {
    auto node = std::make_unique<SoftmaxNode>();
    node->x = GradRef(x);
    node->probs = probs;
    record(std::move(node), {probs});
  }
  return probs;
}

Tensor log_softmax(const Tensor& x) {
  const Rows s = as_rows("log_softmax", x);
  Tensor logprobs = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::log_softmax_forward_fast(s.rows, s.cols, x.data<float>(), logprobs.data<float>());
    else
      kernels::log_softmax_forward_reference<T>(s.rows, s.cols, x.data<T>(), logprobs.data<T>());
  });
  if (needs_grad(x)) {
    auto node = std::make_unique<LogSoftmaxNode>();
    node->x = GradRef(x);
    node->logprobs = logprobs;
    record(std::move(node), {logprobs});
  }
  return logprobs;
}

}  // namespace tf::ops

// GELU, bias + GELU and ReLU, forward and backward side by side, over kernels/reference/activation.h
// (float64, and float32 under ReferenceKernelsGuard) and kernels/cpu/activation.h (float32).
#include "framework/ops/activation.h"

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/activation.h"
#include "framework/kernels/cpu/glu.h"
#include "framework/kernels/mode.h"
#include "framework/ops/reduce.h"

namespace tf::ops {

namespace {

// Shapes: R = rows (every axis of x but the last), C = the last axis.
template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// y = gelu(x + bias) over (R, C); bias undefined means none (then R, C are any split of x).
void run_gelu_forward(GeluApprox approx, const Tensor& x, const Tensor& bias, const Tensor& y) {
  const int64_t cols = bias.defined() ? bias.numel() : x.numel(), rows = cols ? x.numel() / cols : 0;
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::gelu_forward_fast(approx, x.data<float>(), data_or_null<float>(bias), rows, cols, y.data<float>());
    else
      kernels::gelu_forward_reference<T>(approx, x.data<T>(), data_or_null<T>(bias), rows, cols, y.data<T>());
  });
}

struct GeluNode : Node {
  Tensor x, bias;  // saved: the pre-activation x + bias is recomputed from them, not stored
  GeluApprox approx;
  const char* op_name() const override { return bias.defined() ? "bias_gelu" : "gelu"; }
  void backward() override {
    Tensor dpre = gelu_backward(x, bias, outputs[0].grad(), approx);  // (R, C) d loss / d (x + bias)
    if (bias.defined() && bias.requires_grad()) {
      const int64_t cols = bias.numel(), rows = cols ? dpre.numel() / cols : 0;
      accumulate_grad(bias, bias_gradient(dpre, rows, cols));  // (C)
    }
    accumulate_grad(x, std::move(dpre));
  }
};

Tensor gelu_op(const Tensor& x, const Tensor& bias, GeluApprox approx) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  run_gelu_forward(approx, x, bias, y);
  if (needs_grad(x, bias)) {
    auto node = std::make_unique<GeluNode>();
    node->x = x;
    node->bias = bias;
    node->approx = approx;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace

Tensor gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, GeluApprox approx) {
  Tensor dpre = Tensor::empty(x.shape(), x.dtype());  // (R, C)
  const int64_t cols = bias.defined() ? bias.numel() : x.numel(), rows = cols ? x.numel() / cols : 0;
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::gelu_backward_fast(approx, x.data<float>(), data_or_null<float>(bias), dy.data<float>(), rows, cols,
                                  dpre.data<float>());
    else
      kernels::gelu_backward_reference<T>(approx, x.data<T>(), data_or_null<T>(bias), dy.data<T>(), rows, cols,
                                          dpre.data<T>());
  });
  return dpre;
}

Tensor gelu(const Tensor& x, GeluApprox approx) {
  check_floating("gelu", x);
  return gelu_op(x, Tensor(), approx);
}

Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApprox approx) {
  check_floating("bias_gelu", x);
  TF_CHECK(x.rank() >= 1 && bias.rank() == 1 && bias.dim(0) == x.dim(-1), "bias_gelu: bias ",
           bias.describe(), " does not match the last axis of x ", x.describe(), " (expected bias (",
           x.rank() >= 1 ? x.dim(-1) : 0, ",))");
  check_same_dtype("bias_gelu", x, bias);
  return gelu_op(x, bias, approx);
}

namespace {

struct ReluNode : Node {
  GradRef x;  // not saved for its values: y > 0 exactly where x > 0
  Tensor y;   // saved: the output
  const char* op_name() const override { return "relu"; }
  void backward() override {
    const Tensor dy = outputs[0].grad();
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (kernels::use_fast<T>())
        kernels::relu_backward_fast(y.data<float>(), dy.data<float>(), y.numel(), dx.data<float>());
      else
        kernels::relu_backward_reference<T>(y.data<T>(), dy.data<T>(), y.numel(), dx.data<T>());
    });
    accumulate_grad(x, std::move(dx));
  }
};

}  // namespace

Tensor relu(const Tensor& x) {
  check_floating("relu", x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::relu_forward_fast(x.data<float>(), x.numel(), y.data<float>());
    else
      kernels::relu_forward_reference<T>(x.data<T>(), x.numel(), y.data<T>());
  });
  if (needs_grad(x)) {
    auto node = std::make_unique<ReluNode>();
    node->x = GradRef(x);
    node->y = y;
    record(std::move(node), {y});
  }
  return y;
}

namespace {

struct GluNode : Node {
  Tensor h;  // saved: (R, 2F) gates and values; act(a) is recomputed in the backward
  FeedForwardKind kind;
  const char* op_name() const override { return "glu"; }
  void backward() override {
    const Tensor dy = outputs[0].grad();  // (R, F)
    Tensor dh = Tensor::empty(h.shape(), h.dtype());
    const int64_t width = h.dim(-1) / 2, rows = width ? h.numel() / (2 * width) : 0;
    dispatch(h.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (kernels::use_fast<T>() && kind == FeedForwardKind::swiglu)
        kernels::glu_backward_fast(kind, h.data<float>(), dy.data<float>(), rows, width, dh.data<float>());
      else
        kernels::glu_backward_reference<T>(kind, h.data<T>(), dy.data<T>(), rows, width, dh.data<T>());
    });
    accumulate_grad(h, std::move(dh));
  }
};

}  // namespace

Tensor glu(const Tensor& h, FeedForwardKind kind) {
  check_floating("glu", h);
  TF_CHECK(kernels::gated(kind), "glu: feed-forward kind '", kernels::feed_forward_kind_name(kind), "' has no gate");
  TF_CHECK(h.rank() >= 1 && h.dim(-1) % 2 == 0, "glu: the last axis of h holds a gate and a value half, so it must be even, got ",
           h.describe());
  const int64_t width = h.dim(-1) / 2, rows = width ? h.numel() / (2 * width) : 0;
  Shape out_shape = h.shape();
  out_shape[out_shape.rank() - 1] = width;
  Tensor y = Tensor::empty(out_shape, h.dtype());  // (..., F)
  dispatch(h.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>() && kind == FeedForwardKind::swiglu)
      kernels::glu_forward_fast(kind, h.data<float>(), rows, width, y.data<float>());
    else
      kernels::glu_forward_reference<T>(kind, h.data<T>(), rows, width, y.data<T>());
  });
  if (needs_grad(h)) {
    auto node = std::make_unique<GluNode>();
    node->h = h;
    node->kind = kind;
    record(std::move(node), {y});
  }
  return y;
}

namespace {

// One loop for both directions: the row's functions are plain double -> double, so float and
// double take the same path (float through double, as exact as the reference kernels).
template <class T, class F>
void each(const Tensor& in, Tensor& out, F f) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t n = in.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<double>(x[i]), i));
}

struct FeedForwardActivationNode : Node {
  Tensor x;  // saved input; act'(x) is evaluated in the backward
  FeedForwardKind kind;
  const char* op_name() const override { return "feed_forward_activation"; }
  void backward() override {
    const Tensor dy = outputs[0].grad();
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    const auto derivative = kernels::feed_forward_row(kind).derivative;
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* g = dy.data<T>();
      each<T>(x, dx, [&](double v, int64_t i) { return static_cast<double>(g[i]) * derivative(v); });
    });
    accumulate_grad(x, std::move(dx));
  }
};

}  // namespace

Tensor feed_forward_activation(const Tensor& x, FeedForwardKind kind) {
  check_floating("feed_forward_activation", x);
  const kernels::FeedForwardKindRow& row = kernels::feed_forward_row(kind);
  TF_CHECK(!row.gated && row.activation, "feed_forward_activation: feed-forward kind '", row.name,
           "' is ", row.gated ? "gated (ops::glu)" : "GELU (ops::gelu_linear)");
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) { each<decltype(zero)>(x, y, [&](double v, int64_t) { return row.activation(v); }); });
  if (needs_grad(x)) {
    auto node = std::make_unique<FeedForwardActivationNode>();
    node->x = x;
    node->kind = kind;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace tf::ops

// Pointwise functions: one templated loop per direction, and the functions as (f, f') pairs.
#include "framework/ops/pointwise.h"

#include <cmath>

#include "framework/autograd/tape.h"

namespace tf::ops {

namespace {

enum class Pointwise { exp, silu, softplus, tanh, sigmoid };

const char* pointwise_name(Pointwise f) {
  switch (f) {
    case Pointwise::exp: return "exp";
    case Pointwise::silu: return "silu";
    case Pointwise::softplus: return "softplus";
    case Pointwise::tanh: return "tanh";
    case Pointwise::sigmoid: return "sigmoid";
  }
  return "?";
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T value(Pointwise f, T x) {
  switch (f) {
    case Pointwise::exp: return std::exp(x);
    case Pointwise::silu: return x * sigmoid(x);
    case Pointwise::softplus: return x > T(20) ? x : std::log1p(std::exp(x));
    case Pointwise::tanh: return std::tanh(x);
    case Pointwise::sigmoid: return sigmoid(x);
  }
  return x;
}

template <class T>
T derivative(Pointwise f, T x) {
  switch (f) {
    case Pointwise::exp: return std::exp(x);
    case Pointwise::silu: {
      const T s = sigmoid(x);
      return s * (T(1) + x * (T(1) - s));
    }
    case Pointwise::softplus: return sigmoid(x);
    case Pointwise::tanh: {
      const T t = std::tanh(x);
      return T(1) - t * t;
    }
    case Pointwise::sigmoid: {
      const T s = sigmoid(x);
      return s * (T(1) - s);
    }
  }
  return T(1);
}

struct PointwiseNode : Node {
  Tensor x;  // saved: the input, from which f' is recomputed
  Pointwise function;
  const char* op_name() const override { return pointwise_name(function); }
  void backward() override {
    const Tensor dy = take_output_grad();
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* in = x.data<T>();
      const T* g = dy.data<T>();
      T* out = dx.data<T>();
      const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) out[i] = g[i] * derivative(function, in[i]);
    });
    accumulate_grad(x, std::move(dx));
  }
};

Tensor apply(Pointwise function, const Tensor& x) {
  check_floating(pointwise_name(function), x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) out[i] = value(function, in[i]);
  });
  if (needs_grad(x)) {
    auto node = std::make_unique<PointwiseNode>();
    node->x = x;
    node->function = function;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace

Tensor exp(const Tensor& x) { return apply(Pointwise::exp, x); }
Tensor silu(const Tensor& x) { return apply(Pointwise::silu, x); }
Tensor softplus(const Tensor& x) { return apply(Pointwise::softplus, x); }
Tensor tanh(const Tensor& x) { return apply(Pointwise::tanh, x); }
Tensor sigmoid(const Tensor& x) { return apply(Pointwise::sigmoid, x); }

}  // namespace tf::ops

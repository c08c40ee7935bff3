// Causal depthwise convolution: forward and backward side by side; the math is in causal_conv.h.
#include "framework/ops/causal_conv.h"

#include <algorithm>
#include <cstring>

#include "framework/autograd/tape.h"
#include "framework/ops/shape.h"

namespace tf::ops {

namespace {

struct ConvDims {
  int64_t batch, time, channels, taps;
};

ConvDims check_conv(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TF_CHECK(x.rank() == 3 && weight.rank() == 2 && weight.dim(0) == x.dim(2) && weight.dim(1) > 0,
           op, ": x must be (B, T, C) and weight (C, K), got ", x.describe(), " and ", weight.describe());
  check_same_dtype(op, x, weight);
  if (bias.defined()) {
    TF_CHECK(bias.rank() == 1 && bias.dim(0) == x.dim(2), op, ": bias must be (C) = (", x.dim(2), "), got ",
             bias.describe());
    check_same_dtype(op, x, bias);
  }
  return {x.dim(0), x.dim(1), x.dim(2), weight.dim(1)};
}

template <class T>
void conv_forward(const ConvDims& d, const T* x, const T* w, const T* bias, T* y) {
  const int64_t C = d.channels, K = d.taps;
#pragma omp parallel for schedule(static) if (d.batch * d.time * C > 65536)
  for (int64_t row = 0; row < d.batch * d.time; ++row) {
    const int64_t t = row % d.time;
    T* out = y + row * C;
    for (int64_t c = 0; c < C; ++c) out[c] = bias ? bias[c] : T(0);
    for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k) {
      const T* in = x + (row - (K - 1) + k) * C;  // x[b, t - (K - 1) + k]
      for (int64_t c = 0; c < C; ++c) out[c] += w[c * K + k] * in[c];
    }
  }
}

struct CausalConvNode : Node {
  Tensor x, weight;  // saved: each one's gradient reads the other
  GradRef bias;
  ConvDims dims;
  const char* op_name() const override { return "causal_conv1d"; }
  void backward() override {
    const Tensor dy = take_output_grad();  // (B, T, C)
    const ConvDims& d = dims;
    const int64_t C = d.channels, K = d.taps;
    Tensor dx = Tensor::empty(x.shape(), x.dtype()), dw = Tensor::zeros(weight.shape(), x.dtype());
    Tensor db = Tensor::zeros({C}, x.dtype());
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* g = dy.data<T>();
      const T* in = x.data<T>();
      const T* w = weight.data<T>();
#pragma omp parallel for schedule(static) if (d.batch * d.time * C > 65536)
      for (int64_t row = 0; row < d.batch * d.time; ++row) {  // dx[b, s] reads dy[b, s .. s + K - 1]
        const int64_t s = row % d.time;
        T* out = dx.data<T>() + row * C;
        std::fill(out, out + C, T(0));
        for (int64_t k = std::max<int64_t>(0, s + K - d.time); k < K; ++k) {  // s + (K - 1) - k <= T - 1
          const T* gy = g + (row + (K - 1) - k) * C;
          for (int64_t c = 0; c < C; ++c) out[c] += w[c * K + k] * gy[c];
        }
      }
      T* gw = dw.data<T>();
      T* gb = db.data<T>();
      for (int64_t row = 0; row < d.batch * d.time; ++row) {
        const int64_t t = row % d.time;
        const T* gy = g + row * C;
        for (int64_t c = 0; c < C; ++c) gb[c] += gy[c];
        for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k) {
          const T* xin = in + (row - (K - 1) + k) * C;
          for (int64_t c = 0; c < C; ++c) gw[c * K + k] += gy[c] * xin[c];
        }
      }
    });
    accumulate_grad(x, std::move(dx));
    accumulate_grad(weight, std::move(dw));
    accumulate_grad(bias, std::move(db));
  }
};

}  // namespace

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const ConvDims d = check_conv("causal_conv1d", x, weight, bias);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    conv_forward<T>(d, x.data<T>(), weight.data<T>(), bias.defined() ? bias.data<T>() : nullptr, y.data<T>());
  });
  if (needs_grad(x, weight, bias)) {
    auto node = std::make_unique<CausalConvNode>();
    node->x = x;
    node->weight = weight;
    node->bias = GradRef(bias);
    node->dims = d;
    record(std::move(node), {y});
  }
  return y;
}

Tensor causal_conv1d_append(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& state) {
  TF_CHECK(!grad_enabled(), "causal_conv1d_append is for inference: call it under a NoGradGuard");
  const ConvDims d = check_conv("causal_conv1d_append", x, weight, bias);
  const int64_t kept = d.taps - 1;
  TF_CHECK(state.shape() == Shape({d.batch, kept, d.channels}) && state.dtype() == x.dtype(),
           "causal_conv1d_append: the state must be (B, K - 1, C) = (", d.batch, ", ", kept, ", ", d.channels, ") ",
           dtype_name(x.dtype()), ", got ", state.describe());
  if (kept == 0) return causal_conv1d(x, weight, bias);
  // The history's rows and the new ones as one sequence: its last T outputs see the true past.
  const Tensor joined = concat({state, x}, 1);  // (B, K - 1 + T, C)
  const Tensor y = causal_conv1d(joined, weight, bias);
  const Tensor out = split(y, {kept, d.time}, 1)[1];
  const size_t row_bytes = d.channels * dtype_size(x.dtype());
  for (int64_t b = 0; b < d.batch; ++b)  // the newest K - 1 rows of the joined sequence
    std::memcpy(static_cast<std::byte*>(state.raw_data()) + b * kept * row_bytes,
                static_cast<const std::byte*>(joined.raw_data()) + (b * (kept + d.time) + d.time) * row_bytes,
                kept * row_bytes);
  return out;
}

}  // namespace tf::ops

// Layer norm, forward and backward side by side, over kernels/reference/layer_norm.h (float64, and
// float32 under ReferenceKernelsGuard) and kernels/cpu/layer_norm.h (float32).
//
// Note [layer norm backward]: with xhat = (x - mean) rstd and g = dy * weight, differentiating
// through mean and rstd (both functions of the whole row) gives, per row,
//   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat))
// since d xhat_i / d x_j = rstd (delta_ij - 1/C - xhat_i xhat_j / C). The forward saves mean and
// rstd per row ((R) each, C times smaller than x) so the backward does not recompute statistics.
// RMSNorm (kind rms) is the same node with the mean taken as 0 (kernels/reference/layer_norm.h).
#include "framework/ops/layer_norm.h"

#include <type_traits>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/layer_norm.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/layer_norm.h"

namespace tf::ops {

namespace {

// Shapes: R = rows (every axis of x but the last), C = channels (the last axis).

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

void check_param(const char* op, const char* role, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  TF_CHECK(p.rank() == 1 && p.dim(0) == x.dim(-1), op, ": ", role, " ", p.describe(),
           " does not match the last axis of x ", x.describe(), " (expected (", x.dim(-1), ",))");
  check_same_dtype(op, x, p);
}

// The checks layer_norm and add_layer_norm share, named after the op.
void check_layer_norm_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  TF_CHECK(x.rank() >= 1 && x.dtype() != DType::i32, op, ": x must be a floating-point tensor of rank >= 1, got ",
           x.describe());
  TF_CHECK(x.dim(-1) > 0, op, ": the normalised (last) axis of x ", x.describe(), " is empty");
  TF_CHECK(eps >= 0, op, ": eps must be >= 0, got ", eps);
  check_param(op, "weight", weight, x);
  check_param(op, "bias", bias, x);
}

// The fast kernel for float32 unless reference kernels are forced; the reference otherwise.
template <class T>
void layer_norm_forward_kernel(const kernels::LayerNormForwardArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>)
    if (kernels::use_fast<T>()) return kernels::layer_norm_forward_fast(a);
  kernels::layer_norm_forward_reference(a);
}
template <class T>
void layer_norm_backward_kernel(const kernels::LayerNormBackwardArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>)
    if (kernels::use_fast<T>()) return kernels::layer_norm_backward_fast(a);
  kernels::layer_norm_backward_reference(a);
}

Shape row_shape(const Shape& x) {  // x without its last axis: (...)
  Shape rows;
  for (int i = 0; i + 1 < x.rank(); ++i) rows.push_back(x[i]);
  return rows;
}

struct LayerNormNode : Node {
  Tensor x, weight, bias;  // saved: x and weight for dx; bias only so its gradient can be accumulated
  Tensor mean, rstd;       // saved: (R) row statistics from the forward
  kernels::NormKind kind = kernels::NormKind::layer;
  const char* op_name() const override { return "layer_norm"; }
  void backward() override {
    const Tensor dy = outputs[0].grad();  // (R, C)
    const int64_t channels = x.dim(-1), rows = channels ? x.numel() / channels : 0;
    auto wanted = [](const Tensor& t) { return t.defined() && t.requires_grad(); };
    // Undefined when not wanted: the kernel then skips that gradient.
    Tensor dx = wanted(x) ? Tensor::empty(x.shape(), x.dtype()) : Tensor();                  // (R, C)
    Tensor dweight = wanted(weight) ? Tensor::zeros(weight.shape(), x.dtype()) : Tensor();  // (C)
    Tensor dbias = wanted(bias) ? Tensor::zeros(bias.shape(), x.dtype()) : Tensor();        // (C)
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      layer_norm_backward_kernel<T>({.rows = rows, .channels = channels, .kind = kind, .dy = dy.data<T>(), .x = x.data<T>(),
                                     .weight = data_or_null<T>(weight), .mean = mean.data<T>(), .rstd = rstd.data<T>(),
                                     .dx = data_or_null<T>(dx), .dweight = data_or_null<T>(dweight),
                                     .dbias = data_or_null<T>(dbias)});
    });
    accumulate_grad(x, std::move(dx));
    accumulate_grad(weight, std::move(dweight));
    accumulate_grad(bias, std::move(dbias));
  }
};

// h = x + a, n = layer_norm(h). Its backward is LayerNormNode's with dh (h's own gradient, from the
// residual stream) added to dx; x and a both receive that sum, so their values are not kept.
struct AddLayerNormNode : Node {
  GradRef x, a;                // the summands: gradient slots only
  Tensor sum, weight;          // saved: h for xhat, weight for g = dy weight
  GradRef bias;                // its gradient is sum_r dy: no values needed
  Tensor mean, rstd;           // saved: (R) row statistics of h
  kernels::NormKind kind = kernels::NormKind::layer;
  const char* op_name() const override { return "add_layer_norm"; }
  void backward() override {
    const Tensor dsum = take_output_grad(0);    // (R, C) or undefined: h's gradient from its other uses
    const Tensor dnormed = take_output_grad(1);  // (R, C) or undefined
    if (!dnormed.defined()) {                    // only h was used: this is an add
      accumulate_grad(x, dsum);
      accumulate_grad(a, Tensor(dsum));
      return;
    }
    const int64_t channels = sum.dim(-1), rows = channels ? sum.numel() / channels : 0;
    const bool want_dh = x.requires_grad() || a.requires_grad();
    Tensor dh = want_dh ? Tensor::empty(sum.shape(), sum.dtype()) : Tensor();                     // (R, C)
    Tensor dweight = weight.defined() && weight.requires_grad() ? Tensor::zeros(weight.shape(), sum.dtype())
                                                                : Tensor();                      // (C)
    Tensor dbias = bias.requires_grad() ? Tensor::zeros(bias.shape(), sum.dtype()) : Tensor();    // (C)
    dispatch(sum.dtype(), [&](auto zero) {
      using T = decltype(zero);
      layer_norm_backward_kernel<T>({.rows = rows, .channels = channels, .kind = kind, .dy = dnormed.data<T>(),
                                     .dsum = data_or_null<T>(dsum), .x = sum.data<T>(),
                                     .weight = data_or_null<T>(weight), .mean = mean.data<T>(), .rstd = rstd.data<T>(),
                                     .dx = data_or_null<T>(dh), .dweight = data_or_null<T>(dweight),
                                     .dbias = data_or_null<T>(dbias)});
    });
    accumulate_grad(weight, std::move(dweight));
    accumulate_grad(bias, std::move(dbias));
    if (!dh.defined()) return;
    accumulate_grad(x, dh);             // a copy (or a sum): dh goes on to a as well
    accumulate_grad(a, std::move(dh));  // adopted
  }
};

}  // namespace

ResidualNorm add_layer_norm(const Tensor& x, const Tensor& a, const Tensor& weight, const Tensor& bias,
                            double eps, kernels::NormKind kind) {
  check_same_shape("add_layer_norm", x, a);
  check_layer_norm_args("add_layer_norm", x, weight, bias, eps);
  const int64_t channels = x.dim(-1), rows = x.numel() / channels;
  Tensor sum = Tensor::empty(x.shape(), x.dtype());                // (..., C)
  Tensor y = Tensor::empty(x.shape(), x.dtype());                  // (..., C)
  Tensor mean = Tensor::empty(row_shape(x.shape()), x.dtype());    // (...)
  Tensor rstd = Tensor::empty(row_shape(x.shape()), x.dtype());    // (...)
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    layer_norm_forward_kernel<T>({.rows = rows, .channels = channels, .eps = eps, .kind = kind, .x = x.data<T>(),
                                  .residual = a.data<T>(), .weight = data_or_null<T>(weight),
                                  .bias = data_or_null<T>(bias), .sum = sum.data<T>(), .y = y.data<T>(),
                                  .mean = mean.data<T>(), .rstd = rstd.data<T>()});
  });
  if (needs_grad(x, a, weight, bias)) {
    auto node = std::make_unique<AddLayerNormNode>();
    node->x = GradRef(x);
    node->a = GradRef(a);
    node->sum = sum;
    node->weight = weight;
    node->bias = GradRef(bias);
    node->mean = mean;
    node->rstd = rstd;
    node->kind = kind;
    record(std::move(node), {sum, y});
  }
  return {sum, y};
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, kernels::NormKind kind) {
  check_layer_norm_args("layer_norm", x, weight, bias, eps);
  const int64_t channels = x.dim(-1), rows = x.numel() / channels;
  Tensor y = Tensor::empty(x.shape(), x.dtype());                // (..., C)
  Tensor mean = Tensor::empty(row_shape(x.shape()), x.dtype());  // (...)
  Tensor rstd = Tensor::empty(row_shape(x.shape()), x.dtype());  // (...)
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    layer_norm_forward_kernel<T>({.rows = rows, .channels = channels, .eps = eps, .kind = kind, .x = x.data<T>(),
                                  .weight = data_or_null<T>(weight), .bias = data_or_null<T>(bias), .y = y.data<T>(),
                                  .mean = mean.data<T>(), .rstd = rstd.data<T>()});
  });
  if (needs_grad(x, weight, bias)) {
    auto node = std::make_unique<LayerNormNode>();
    node->x = x;
    node->weight = weight;
    node->bias = bias;
    node->mean = mean;
    node->rstd = rstd;
    node->kind = kind;
    record(std::move(node), {y});
  }
  return y;
}

}  // namespace tf::ops

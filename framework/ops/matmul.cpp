// matmul and linear, forward and backward side by side, over kernels/matmul.h.
#include "framework/ops/matmul.h"

#include <optional>

#include "framework/autograd/tape.h"
#include "framework/kernels/matmul.h"
#include "framework/kernels/mode.h"
#include "framework/ops/activation.h"
#include "framework/ops/reduce.h"

namespace tf::ops {

namespace {

// Runs C = op(A) op(B) (+ bias on every row) (+ C when dims.accumulate) with the kernel the dtype
// and mode select. An empty inner dimension (k = 0) goes to the reference kernel, which handles it.
void run_matmul(const kernels::MatmulDims& d, const Tensor& a, const Tensor& b, const Tensor& c,
                const Tensor& bias = Tensor()) {
  if (d.batch * d.m * d.n == 0) return;
  dispatch(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>() && d.k > 0)
      kernels::matmul_fast(d, a.data<float>(), b.data<float>(), c.data<float>(),
                           bias.defined() ? bias.data<float>() : nullptr);
    else
      kernels::matmul_reference<T>(d, a.data<T>(), b.data<T>(), c.data<T>(),
                                   bias.defined() ? bias.data<T>() : nullptr);
  });
}

struct MatmulShapes {
  kernels::MatmulDims dims;
  Shape out;
};

MatmulShapes matmul_shapes(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_same_dtype("matmul", a, b);
  check_floating("matmul", a);
  TF_CHECK(a.rank() >= 2 && b.rank() >= 2, "matmul: operands must be at least matrices, got ",
           a.shape(), " and ", b.shape());
  kernels::MatmulDims d;
  d.trans_a = trans_a;
  d.trans_b = trans_b;
  d.m = trans_a ? a.dim(-1) : a.dim(-2);
  d.k = trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = trans_b ? b.dim(-1) : b.dim(-2);
  d.n = trans_b ? b.dim(-2) : b.dim(-1);
  TF_CHECK(d.k == kb, "matmul: inner dimensions differ: ", a.shape(), (trans_a ? "^T" : ""), " . ",
           b.shape(), (trans_b ? "^T" : ""), " (", d.k, " vs ", kb, ")");
  d.batch = a.shape().numel_before(-2);
  d.b_broadcast = b.rank() == 2;
  if (!d.b_broadcast) {
    bool same_batch = a.rank() == b.rank();
    for (int i = 0; same_batch && i < a.rank() - 2; ++i) same_batch = a.dim(i) == b.dim(i);
    TF_CHECK(same_batch, "matmul: batch dimensions differ: ", a.shape(), " vs ", b.shape());
  }
  MatmulShapes s{d, a.shape()};
  s.out[-2] = d.m;
  s.out[-1] = d.n;
  return s;
}

struct MatmulNode : Node {
  Tensor a, b;  // saved: each operand's gradient needs the other
  bool trans_a, trans_b;
  const char* op_name() const override { return "matmul"; }
  void backward() override {
    // With C = A B:  dA = dC B^T,  dB = A^T dC; transposed operands swap roles accordingly.
    const Tensor dc = outputs[0].grad();
    if (a.requires_grad()) {
      Tensor da = trans_a ? matmul(b, dc, trans_b, true) : matmul(dc, b, false, !trans_b);
      accumulate_grad(a, std::move(da));
    }
    if (b.requires_grad()) {
      Tensor db;
      if (b.rank() == 2 && a.rank() > 2) {
        // b was shared by every batch entry (trans_a is refused there): fold the batch into rows.
        const Tensor a2 = a.view({a.shape().numel_before(-1), a.dim(-1)});     // (R, k)
        const Tensor dc2 = dc.view({dc.shape().numel_before(-1), dc.dim(-1)});  // (R, n)
        db = trans_b ? matmul(dc2, a2, true, false) : matmul(a2, dc2, true, false);
      } else {
        db = trans_b ? matmul(dc, a, true, trans_a) : matmul(a, dc, !trans_a, false);
      }
      accumulate_grad(b, std::move(db));
    }
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const MatmulShapes s = matmul_shapes(a, b, trans_a, trans_b);
  TF_CHECK(!(s.dims.b_broadcast && a.rank() > 2 && trans_a),
           "matmul: a transposed batch against a shared matrix is not supported");
  Tensor out = Tensor::empty(s.out, a.dtype());
  run_matmul(s.dims, a, b, out);
  if (needs_grad(a, b)) {
    auto node = std::make_unique<MatmulNode>();
    node->a = a;
    node->b = b;
    node->trans_a = trans_a;
    node->trans_b = trans_b;
    record(std::move(node), {out});
  }
  return out;
}

namespace {

struct LinearNode : Node {
  Tensor x, weight, bias;  // saved: x for dW, weight for dx
  // gelu_linear: x is GELU's input, and the layer's input gelu(x) is recomputed from it.
  std::optional<kernels::GeluApprox> input_gelu;
  const char* op_name() const override { return input_gelu ? "gelu_linear" : "linear"; }
  void backward() override {
    // y = u W^T + b over rows of u, u = x or gelu(x):  du = dy W,  dW = dy^T u,  db = sum over rows of dy.
    const Tensor dy = outputs[0].grad();
    const int64_t rows = x.shape().numel_before(-1);  // not numel / dim(-1): in_features may be 0
    const Tensor dy2 = dy.view({rows, weight.dim(0)});
    if (weight.requires_grad()) {
      const Tensor u = input_gelu ? gelu(x, *input_gelu) : x;  // freed before du is made
      accumulate_grad(weight, matmul(dy2, u.view({rows, x.dim(-1)}), true, false));
    }
    if (bias.defined() && bias.requires_grad()) accumulate_grad(bias, bias_gradient(dy2, rows, weight.dim(0)));
    if (!x.requires_grad()) return;
    Tensor du = matmul(dy2, weight).view(x.shape());
    accumulate_grad(x, input_gelu ? gelu_backward(x, Tensor(), du, *input_gelu) : std::move(du));
  }
};

// linear, or gelu_linear when input_gelu is set: x is then GELU's input.
Tensor linear_op(const Tensor& x, const Tensor& weight, const Tensor& bias,
                 std::optional<kernels::GeluApprox> input_gelu) {
  const char* op = input_gelu ? "gelu_linear" : "linear";
  TF_CHECK(weight.rank() == 2 && x.rank() >= 1 && x.dim(-1) == weight.dim(1), op, ": input ", x.describe(),
           " does not match weight ", weight.describe(), " (expected input (..., ", weight.rank() == 2 ? weight.dim(1) : -1,
           "))");
  check_same_dtype(op, x, weight);
  check_floating(op, x);
  if (bias.defined()) {
    TF_CHECK(bias.rank() == 1 && bias.dim(0) == weight.dim(0), op, ": bias ", bias.describe(),
             " does not match weight ", weight.describe());
    check_same_dtype(op, x, bias);
  }
  const int64_t rows = x.shape().numel_before(-1), out_features = weight.dim(0);
  Shape out_shape = x.shape();
  out_shape[-1] = out_features;
  Tensor out = Tensor::empty(out_shape, x.dtype());
  kernels::MatmulDims d;
  d.m = rows;
  d.k = x.dim(-1);
  d.n = out_features;
  d.trans_b = true;
  if (input_gelu) {
    const NoGradGuard unrecorded;  // a temporary: the node recomputes it
    run_matmul(d, gelu(x, *input_gelu), weight, out, bias);
  } else {
    run_matmul(d, x, weight, out, bias);
  }
  if (needs_grad(x, weight, bias)) {
    auto node = std::make_unique<LinearNode>();
    node->x = x;
    node->weight = weight;
    node->bias = bias;
    node->input_gelu = input_gelu;
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_op(x, weight, bias, std::nullopt);
}

Tensor gelu_linear(const Tensor& pre_activation, const Tensor& weight, const Tensor& bias,
                   kernels::GeluApprox approx) {
  return linear_op(pre_activation, weight, bias, approx);
}

}  // namespace tf::ops

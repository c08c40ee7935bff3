// Elementwise binary ops with broadcasting, forward and backward side by side.
// Gradients of broadcast operands are folded back with sum_to_shape.
#include "framework/ops/elementwise.h"

#include "framework/autograd/tape.h"
#include "framework/ops/broadcast.h"

namespace tf::ops {

namespace {

enum class BinaryOp { add, sub, mul, div };
const char* binary_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div"};
  return names[static_cast<int>(op)];
}

// Reference kernel (and the only one: these are memory-bound, the compiler vectorises the
// contiguous inner loop of for_each_broadcast).
Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_same_dtype(binary_name(op), a, b);
  check_floating(binary_name(op), a);
  const Shape out_shape = broadcast_shapes(binary_name(op), a.shape(), b.shape());
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const auto sa = broadcast_strides(a.shape(), out_shape), sb = broadcast_strides(b.shape(), out_shape);
  dispatch(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    auto run = [&](auto f) {
      if (a.shape() == b.shape()) {
        for (int64_t i = 0, n = out.numel(); i < n; ++i) po[i] = f(pa[i], pb[i]);
      } else {
        for_each_broadcast(out_shape, sa, sb, [&](int64_t o, int64_t i, int64_t j) { po[o] = f(pa[i], pb[j]); });
      }
    };
    switch (op) {
      case BinaryOp::add: run([](T x, T y) { return x + y; }); break;
      case BinaryOp::sub: run([](T x, T y) { return x - y; }); break;
      case BinaryOp::mul: run([](T x, T y) { return x * y; }); break;
      case BinaryOp::div: run([](T x, T y) { return x / y; }); break;
    }
  });
  return out;
}

struct BinaryNode : Node {
  BinaryOp op;
  GradRef a, b;                // the operands' gradient slots and shapes
  Tensor a_values, b_values;  // saved for mul and div only: each operand's gradient needs the other
  const char* op_name() const override { return binary_name(op); }
  void backward() override {
    Tensor dout = take_output_grad();
    // The last use of dout hands it over (adopted, not copied) when no broadcast was undone.
    auto last_use = [&](const Shape& shape) { return shape == dout.shape() ? std::move(dout) : sum_to_shape(dout, shape); };
    switch (op) {
      case BinaryOp::add:
        accumulate_grad(a, sum_to_shape(dout, a.shape()));
        accumulate_grad(b, last_use(b.shape()));
        break;
      case BinaryOp::sub:
        accumulate_grad(b, sum_to_shape(neg(dout), b.shape()));
        accumulate_grad(a, last_use(a.shape()));
        break;
      case BinaryOp::mul:
        if (a.requires_grad()) accumulate_grad(a, sum_to_shape(mul(dout, b_values), a.shape()));
        if (b.requires_grad()) accumulate_grad(b, sum_to_shape(mul(dout, a_values), b.shape()));
        break;
      case BinaryOp::div:  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
        if (a.requires_grad()) accumulate_grad(a, sum_to_shape(div(dout, b_values), a.shape()));
        if (b.requires_grad())
          accumulate_grad(b, sum_to_shape(neg(div(mul(dout, a_values), mul(b_values, b_values))), b.shape()));
        break;
    }
  }
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(op, a, b);
  if (needs_grad(a, b)) {
    auto node = std::make_unique<BinaryNode>();
    node->op = op;
    node->a = GradRef(a);
    node->b = GradRef(b);
    if (op == BinaryOp::mul || op == BinaryOp::div) {  // add and sub need no values: a residual branch is freed early
      node->a_values = a;
      node->b_values = b;
    }
    record(std::move(node), {out});
  }
  return out;
}

struct ScaleNode : Node {
  GradRef x;  // not saved for its values: only so its gradient can be accumulated
  double factor;
  const char* op_name() const override { return "scale"; }
  void backward() override { accumulate_grad(x, scale(outputs[0].grad(), factor)); }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }

Tensor scale(const Tensor& x, double factor) {
  check_floating("scale", x);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T f = static_cast<T>(factor);
    for (int64_t i = 0, n = x.numel(); i < n; ++i) po[i] = f * px[i];
  });
  if (needs_grad(x)) {
    auto node = std::make_unique<ScaleNode>();
    node->x = GradRef(x);
    node->factor = factor;
    record(std::move(node), {out});
  }
  return out;
}

Tensor neg(const Tensor& x) { return scale(x, -1.0); }

}  // namespace tf::ops

// sum and mean, forward and backward side by side, over kernels/reference/reduce.h.
//
// A reduction over a set of axes is planned as a list of (outer, reduce, inner) blocks, one per run
// of adjacent reduced axes, taken right to left: sum over axes {0, 2, 3} of (A, B, C, D) is
// (A*B, C*D, 1) -> (A, B), then (1, A, B) -> (B,). The backward replays the blocks in reverse,
// broadcasting the gradient back out.
#include "framework/ops/reduce.h"

#include <array>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/reduce.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/reduce.h"

namespace tf::ops {

namespace {

struct ReducePlan {
  std::vector<kernels::ReduceDims> steps;  // forward order
  Shape out;                               // result shape (keepdim applied)
  int64_t count = 1;                       // elements summed into each output element
};

ReducePlan plan_reduce(const Shape& in, const std::array<bool, Shape::kMaxRank>& reduced,
                       bool keepdim) {
  ReducePlan plan;
  std::vector<int64_t> dims = in.vec();  // shrinks as runs are reduced, right to left
  for (int end = in.rank(); end > 0;) {
    if (!reduced[end - 1]) {
      --end;
      continue;
    }
    int begin = end - 1;
    while (begin > 0 && reduced[begin - 1]) --begin;
    kernels::ReduceDims d;
    for (int a = 0; a < begin; ++a) d.outer *= dims[a];
    for (int a = begin; a < end; ++a) d.reduce *= dims[a];
    for (size_t a = end; a < dims.size(); ++a) d.inner *= dims[a];
    plan.steps.push_back(d);
    plan.count *= d.reduce;
    dims.erase(dims.begin() + begin, dims.begin() + end);
    end = begin;
  }
  for (int a = 0; a < in.rank(); ++a) {
    if (!reduced[a]) plan.out.push_back(in[a]);
    else if (keepdim) plan.out.push_back(1);
  }
  return plan;
}

std::array<bool, Shape::kMaxRank> axes_mask(const char* op, const Shape& shape, const std::vector<int>& axes) {
  TF_CHECK(!axes.empty(), op, ": no axes given for shape ", shape, "; call ", op,
           "(x) to reduce over every axis");
  std::array<bool, Shape::kMaxRank> mask{};
  for (int a : axes) {
    TF_CHECK(a >= -shape.rank() && a < shape.rank(), op, ": axis ", a, " out of range for shape ", shape);
    const int resolved = shape.axis(a);
    TF_CHECK(!mask[resolved], op, ": axis ", a, " given twice for shape ", shape);
    mask[resolved] = true;
  }
  return mask;
}

struct ReduceNode : Node {
  GradRef x;  // not saved for its values: only so its gradient can be accumulated
  const char* name;  // "sum" or "mean"
  std::vector<kernels::ReduceDims> steps;
  double scale;  // 1 for sum, 1 / count for mean
  const char* op_name() const override { return name; }
  void backward() override {
    // d(scale * sum_r x_r) / dx_r = scale: the output gradient is broadcast back over each block.
    Tensor grad = take_output_grad();  // a rank-0 x has no steps: count 1, scale 1, grad passes through
    for (size_t s = steps.size(); s-- > 0;) {
      const kernels::ReduceDims& d = steps[s];
      Tensor wider = Tensor::empty({d.outer * d.reduce * d.inner}, grad.dtype());  // (outer, reduce, inner)
      dispatch(grad.dtype(), [&](auto zero) {
        using T = decltype(zero);
        kernels::reduce_sum_backward_reference<T>(d, grad.data<T>(), wider.data<T>(), s == 0 ? scale : 1.0);
      });
      grad = std::move(wider);
    }
    accumulate_grad(x, std::move(grad).view(x.shape()));
  }
};

Tensor reduce(const char* op, bool is_mean, const Tensor& x, const std::array<bool, Shape::kMaxRank>& mask,
              bool keepdim) {
  const ReducePlan plan = plan_reduce(x.shape(), mask, keepdim);
  TF_CHECK(!is_mean || plan.count > 0, op, ": cannot average over zero elements (shape ", x.shape(), ")");
  const double scale = is_mean ? 1.0 / static_cast<double>(plan.count) : 1.0;
  Tensor out;
  if (plan.steps.empty()) {
    out = x.clone().view(plan.out);  // a rank-0 input: nothing to reduce
  } else {
    Tensor current = x;
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const kernels::ReduceDims& d = plan.steps[s];
      Tensor next = Tensor::empty({d.outer * d.inner}, x.dtype());  // (outer, inner)
      dispatch(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const double step_scale = s + 1 == plan.steps.size() ? scale : 1.0;
        kernels::reduce_sum_reference<T>(d, current.data<T>(), next.data<T>(), step_scale);
      });
      current = next;
    }
    out = current.view(plan.out);
  }
  if (needs_grad(x)) {
    auto node = std::make_unique<ReduceNode>();
    node->x = GradRef(x);
    node->name = op;
    node->steps = plan.steps;
    node->scale = scale;
    record(std::move(node), {out});
  }
  return out;
}

std::array<bool, Shape::kMaxRank> all_axes(const Shape& shape) {
  std::array<bool, Shape::kMaxRank> mask{};
  for (int a = 0; a < shape.rank(); ++a) mask[a] = true;
  return mask;
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce("sum", false, x, all_axes(x.shape()), false); }
Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdim) {
  return reduce("sum", false, x, axes_mask("sum", x.shape(), axes), keepdim);
}
Tensor mean(const Tensor& x) { return reduce("mean", true, x, all_axes(x.shape()), false); }
Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdim) {
  return reduce("mean", true, x, axes_mask("mean", x.shape(), axes), keepdim);
}

Tensor bias_gradient(const Tensor& grad, int64_t rows, int64_t cols) {
  TF_CHECK(grad.numel() == rows * cols, "bias_gradient: ", grad.describe(), " is not (", rows, ", ", cols, ")");
  Tensor out = Tensor::empty({cols}, grad.dtype());  // (C)
  const kernels::ReduceDims d{1, rows, cols};
  dispatch(grad.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>())
      kernels::reduce_sum_fast(d, grad.data<float>(), out.data<float>());
    else
      kernels::reduce_sum_reference<T>(d, grad.data<T>(), out.data<T>(), 1.0);
  });
  return out;
}

}  // namespace tf::ops

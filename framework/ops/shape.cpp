// reshape, transpose/permute, concat and split, forward and backward side by side.
// These ops move elements without arithmetic, so they also accept i32 tensors (token ids); only
// floating tensors are ever recorded, because only they can require grad.
#include "framework/ops/shape.h"

#include <array>
#include <cstring>

#include "framework/autograd/tape.h"
#include "framework/object_pool.h"
#include "framework/kernels/mode.h"

namespace tf::ops {

namespace {

// Like tf::dispatch, but i32 is allowed: calls f(float{}), f(double{}) or f(int32_t{}).
template <class F>
void dispatch_any(DType d, F&& f) {
  if (d == DType::f32) f(float{});
  else if (d == DType::f64) f(double{});
  else f(int32_t{});
}

std::array<int64_t, Shape::kMaxRank> row_major_strides(const Shape& s) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t stride = 1;
  for (int a = s.rank() - 1; a >= 0; --a) {
    strides[a] = stride;
    stride *= s[a];
  }
  return strides;
}

int checked_axis(const char* op, const Shape& shape, int axis) {
  TF_CHECK(axis >= -shape.rank() && axis < shape.rank(), op, ": axis ", axis, " out of range for shape ", shape);
  return shape.axis(axis);
}

int64_t numel_after(const Shape& s, int axis) {
  int64_t n = 1;
  for (int a = axis + 1; a < s.rank(); ++a) n *= s[a];
  return n;
}

// Copies `rows` rows of `width` bytes between buffers whose rows are src_pitch / dst_pitch bytes
// apart: one operand's slab inside the concatenated tensor, viewed as (outer, dim * inner).
void copy_rows(const std::byte* src, int64_t src_pitch, std::byte* dst, int64_t dst_pitch, int64_t rows,
               int64_t width) {
  if (width == 0) return;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_pitch, src + r * src_pitch, width);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// reshape

namespace {

// "(2, -1, 3)", for messages only: built when a check fails, so a warm step allocates nothing here.
std::string spelled(std::span<const int64_t> dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + ")";
}

Shape infer_shape(const Tensor& x, std::span<const int64_t> dims) {
  TF_CHECK(dims.size() <= static_cast<size_t>(Shape::kMaxRank), "reshape: ", spelled(dims), " has more than ",
           Shape::kMaxRank, " dimensions");
  int inferred = -1;
  int64_t known = 1;
  Shape shape;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      TF_CHECK(inferred < 0, "reshape: more than one -1 in ", spelled(dims), " for ", x.describe());
      inferred = static_cast<int>(i);
    } else {
      TF_CHECK(dims[i] >= 0, "reshape: negative dimension ", dims[i], " in ", spelled(dims), " for ", x.describe());
      known *= dims[i];
    }
    shape.push_back(dims[i]);
  }
  if (inferred >= 0) {
    TF_CHECK(known > 0 && x.numel() % known == 0, "reshape: cannot infer the -1 in ", spelled(dims), " for ",
             x.describe(), " (", x.numel(), " elements)");
    shape[inferred] = x.numel() / known;
  }
  TF_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape ", x.describe(), " (", x.numel(),
           " elements) to ", shape, " (", shape.numel(), " elements)");
  return shape;
}

struct ReshapeNode : Node {
  GradRef x;  // not saved for its values: only its shape and gradient
  const char* op_name() const override { return "reshape"; }
  void backward() override { accumulate_grad(x, take_output_grad().view(x.shape())); }
};

}  // namespace

Tensor reshape(const Tensor& x, std::span<const int64_t> dims) {
  Tensor out = x.view(infer_shape(x, dims));
  if (needs_grad(x)) {
    auto node = std::make_unique<ReshapeNode>();
    node->x = GradRef(x);
    record(std::move(node), {out});
  }
  return out;
}
Tensor reshape(const Tensor& x, std::initializer_list<int64_t> dims) {
  return reshape(x, std::span<const int64_t>(dims.begin(), dims.size()));
}
Tensor reshape(const Tensor& x, const Shape& shape) {
  return reshape(x, std::span<const int64_t>(shape.begin(), static_cast<size_t>(shape.rank())));
}

// ---------------------------------------------------------------------------------------------
// permute and transpose

template <class T>
void permute_reference(const Shape& in_shape, const std::vector<int>& order, const T* x, T* out) {
  const int rank = in_shape.rank();
  const auto in_strides = row_major_strides(in_shape);
  Shape out_shape;
  for (int k = 0; k < rank; ++k) out_shape.push_back(in_shape[order[k]]);
  for (int64_t o = 0, n = out_shape.numel(); o < n; ++o) {
    int64_t rem = o, offset = 0;
    for (int k = rank - 1; k >= 0; --k) {
      offset += (rem % out_shape[k]) * in_strides[order[k]];
      rem /= out_shape[k];
    }
    out[o] = x[offset];
  }
}

// Trailing axes that stay in place form one contiguous block of `block` elements, copied whole
// (for (B, T, H, D) <-> (B, H, T, D) that is a row of D). Of the moved axes, the innermost (n
// blocks, `stride` apart in x) is walked in a loop; the others are decoded once per output row.
template <class T>
void permute_fast(const Shape& in_shape, const std::vector<int>& order, const T* x, T* out) {
  const int64_t total = in_shape.numel();
  if (total == 0) return;
  int moved = in_shape.rank();
  int64_t block = 1;
  while (moved > 0 && order[moved - 1] == moved - 1) block *= in_shape[--moved];
  if (moved == 0) {
    std::memcpy(out, x, total * sizeof(T));
    return;
  }
  const auto in_strides = row_major_strides(in_shape);
  std::array<int64_t, Shape::kMaxRank> dims{}, strides{};  // of the moved output axes, in x's elements
  for (int k = 0; k < moved; ++k) dims[k] = in_shape[order[k]], strides[k] = in_strides[order[k]];
  const int64_t n = dims[moved - 1], stride = strides[moved - 1];
  const int64_t rows = total / (n * block);
#pragma omp parallel for schedule(static) if (total > (1 << 16))
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rem = row, base = 0;
    for (int k = moved - 2; k >= 0; --k) {
      base += (rem % dims[k]) * strides[k];
      rem /= dims[k];
    }
    T* dst = out + row * n * block;  // (n, block)
    if (block == 1) {
      for (int64_t j = 0; j < n; ++j) dst[j] = x[base + j * stride];
    } else {
      for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * block, x + base + j * stride, block * sizeof(T));
    }
  }
}

template void permute_reference<float>(const Shape&, const std::vector<int>&, const float*, float*);
template void permute_reference<double>(const Shape&, const std::vector<int>&, const double*, double*);
template void permute_reference<int32_t>(const Shape&, const std::vector<int>&, const int32_t*, int32_t*);
template void permute_fast<float>(const Shape&, const std::vector<int>&, const float*, float*);
template void permute_fast<double>(const Shape&, const std::vector<int>&, const double*, double*);
template void permute_fast<int32_t>(const Shape&, const std::vector<int>&, const int32_t*, int32_t*);

namespace {

std::vector<int> checked_order(const char* op, const Shape& shape, std::vector<int> order) {
  auto spelled = [&] {
    std::string s = "(";
    for (size_t i = 0; i < order.size(); ++i) s += (i ? ", " : "") + std::to_string(order[i]);
    return s + ")";
  };
  TF_CHECK(static_cast<int>(order.size()) == shape.rank(), op, ": order ", spelled(), " has ", order.size(),
           " axes but the input has shape ", shape);
  std::array<bool, Shape::kMaxRank> seen{};
  std::vector<int> resolved(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    TF_CHECK(order[k] >= -shape.rank() && order[k] < shape.rank(), op, ": axis ", order[k], " in order ",
             spelled(), " out of range for shape ", shape);
    resolved[k] = shape.axis(order[k]);
    TF_CHECK(!seen[resolved[k]], op, ": axis ", order[k], " appears twice in order ", spelled());
    seen[resolved[k]] = true;
  }
  return resolved;
}

Tensor permute_forward(const Tensor& x, const std::vector<int>& order) {
  Shape out_shape;
  for (int a : order) out_shape.push_back(x.dim(a));
  Tensor out = Tensor::empty(out_shape, x.dtype());
  dispatch_any(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if (kernels::use_fast<T>()) permute_fast<T>(x.shape(), order, x.data<T>(), out.data<T>());
    else permute_reference<T>(x.shape(), order, x.data<T>(), out.data<T>());
  });
  return out;
}

struct PermuteNode : Node {
  GradRef x;  // not saved for its values: only its gradient
  const char* name;  // "permute" or "transpose"
  std::vector<int> order;
  const char* op_name() const override { return name; }
  void backward() override {
    // out[.., i_k, ..] = x[.., i_order[k], ..]: the gradient goes back through the inverse order.
    std::vector<int> inverse(order.size());
    for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int>(k);
    accumulate_grad(x, permute_forward(take_output_grad(), inverse));
  }
};

Tensor permute_op(const char* name, const Tensor& x, std::vector<int> order) {
  Tensor out = permute_forward(x, order);
  if (needs_grad(x)) {
    auto node = std::make_unique<PermuteNode>();
    node->x = GradRef(x);
    node->name = name;
    node->order = std::move(order);
    record(std::move(node), {out});
  }
  return out;
}

}  // namespace

Tensor permute(const Tensor& x, std::vector<int> order) {
  return permute_op("permute", x, checked_order("permute", x.shape(), std::move(order)));
}

Tensor transpose(const Tensor& x, int axis0, int axis1) {
  const int a0 = checked_axis("transpose", x.shape(), axis0), a1 = checked_axis("transpose", x.shape(), axis1);
  std::vector<int> order(x.rank());
  for (int k = 0; k < x.rank(); ++k) order[k] = k;
  std::swap(order[a0], order[a1]);
  return permute_op("transpose", x, std::move(order));
}

// ---------------------------------------------------------------------------------------------
// concat and split: each operand is a slab of `size * inner` elements in every one of the `outer`
// rows of the joined tensor, viewed as (outer, dim * inner).

namespace {

struct ConcatNode : Node {
  std::vector<GradRef> xs;  // not saved for their values: only their gradients
  int axis;
  const char* op_name() const override { return "concat"; }
  void backward() override {
    const Tensor dout = outputs[0].grad();
    const int64_t outer = dout.shape().numel_before(axis), inner = numel_after(dout.shape(), axis);
    const int64_t elem = dtype_size(dout.dtype()), pitch = dout.dim(axis) * inner * elem;
    int64_t offset = 0;  // bytes into each row of dout
    for (const GradRef& x : xs) {
      const int64_t width = x.dim(axis) * inner * elem;
      if (x.requires_grad()) {
        Tensor dx = Tensor::empty(x.shape(), x.dtype());
        copy_rows(static_cast<const std::byte*>(dout.raw_data()) + offset, pitch,
                  static_cast<std::byte*>(dx.raw_data()), width, outer, width);
        accumulate_grad(x, std::move(dx));
      }
      offset += width;
    }
  }
};

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  TF_CHECK(!xs.empty(), "concat: no tensors given");
  const Tensor& first = xs[0];
  TF_CHECK(first.rank() > 0, "concat: cannot join rank-0 tensors (", first.describe(), ")");
  const int a = checked_axis("concat", first.shape(), axis);
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    TF_CHECK(x.dtype() == first.dtype(), "concat: tensor ", i, " is ", x.describe(), " but tensor 0 is ",
             first.describe(), "; dtypes must agree");
    bool same = x.rank() == first.rank();
    for (int k = 0; same && k < x.rank(); ++k) same = k == a || x.dim(k) == first.dim(k);
    TF_CHECK(same, "concat: tensor ", i, " has shape ", x.shape(), " but tensor 0 has shape ", first.shape(),
             "; all dimensions except axis ", axis, " must agree");
    out_shape[a] += x.dim(a);
  }
  Tensor out = Tensor::empty(out_shape, first.dtype());
  const int64_t outer = out_shape.numel_before(a), inner = numel_after(out_shape, a);
  const int64_t elem = dtype_size(out.dtype()), pitch = out_shape[a] * inner * elem;
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    const int64_t width = x.dim(a) * inner * elem;
    copy_rows(static_cast<const std::byte*>(x.raw_data()), width, static_cast<std::byte*>(out.raw_data()) + offset,
              pitch, outer, width);
    offset += width;
  }
  bool any_grad = false;
  for (const Tensor& x : xs) any_grad = any_grad || needs_grad(x);
  if (any_grad) {
    auto node = std::make_unique<ConcatNode>();
    for (const Tensor& x : xs) node->xs.emplace_back(x);
    node->axis = a;
    record(std::move(node), {out});
  }
  return out;
}

namespace {

struct SplitNode : Node {
  GradRef x;  // not saved for its values: only its gradient
  int axis;
  const char* op_name() const override { return "split"; }
  void backward() override {
    // dx is the concatenation of the outputs' gradients; an output nobody used contributes zeros.
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    const int64_t outer = x.shape().numel_before(axis), inner = numel_after(x.shape(), axis);
    const int64_t elem = dtype_size(x.dtype()), pitch = x.dim(axis) * inner * elem;
    auto* dst = static_cast<std::byte*>(dx.raw_data());
    int64_t offset = 0;
    for (const GradRef& out : outputs) {
      const int64_t width = out.dim(axis) * inner * elem;
      const Tensor dout = out.grad();
      if (dout.defined()) {
        copy_rows(static_cast<const std::byte*>(dout.raw_data()), width, dst + offset, pitch, outer, width);
      } else {
        for (int64_t r = 0; r < outer && width > 0; ++r) std::memset(dst + offset + r * pitch, 0, width);
      }
      offset += width;
    }
    accumulate_grad(x, std::move(dx));
  }
};

}  // namespace

std::pmr::vector<Tensor> split(const Tensor& x, std::span<const int64_t> sizes, int axis) {
  TF_CHECK(x.rank() > 0, "split: cannot split a rank-0 tensor (", x.describe(), ")");
  const int a = checked_axis("split", x.shape(), axis);
  TF_CHECK(!sizes.empty(), "split: no sizes given for ", x.describe());
  int64_t total = 0;
  for (int64_t s : sizes) {
    TF_CHECK(s >= 0, "split: negative size ", s, " in ", spelled(sizes));
    total += s;
  }
  TF_CHECK(total == x.dim(a), "split: sizes ", spelled(sizes), " add up to ", total, " but axis ", axis, " of ",
           x.describe(), " has ", x.dim(a));
  const int64_t outer = x.shape().numel_before(a), inner = numel_after(x.shape(), a);
  const int64_t elem = dtype_size(x.dtype()), pitch = x.dim(a) * inner * elem;
  std::pmr::vector<Tensor> outs(object_pool::allocator<Tensor>());  // pooled: no malloc in a warm step
  outs.reserve(sizes.size());
  int64_t offset = 0;
  for (int64_t s : sizes) {
    Shape shape = x.shape();
    shape[a] = s;
    Tensor out = Tensor::empty(shape, x.dtype());
    const int64_t width = s * inner * elem;
    copy_rows(static_cast<const std::byte*>(x.raw_data()) + offset, pitch, static_cast<std::byte*>(out.raw_data()),
              width, outer, width);
    offset += width;
    outs.push_back(out);
  }
  if (needs_grad(x)) {
    auto node = std::make_unique<SplitNode>();
    node->x = GradRef(x);
    node->axis = a;
    record(std::move(node), outs);
  }
  return outs;
}

}  // namespace tf::ops

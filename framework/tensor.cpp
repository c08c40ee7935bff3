// Tensor storage, factories and copies.
#include "framework/tensor.h"

#include "framework/object_pool.h"
#include "framework/storage_pool.h"

#include <atomic>
#include <cstdlib>
#include <algorithm>
#include <cstring>

namespace tf {

const char* dtype_name(DType d) {
  static const char* names[] = {"f32", "f64", "i32"};
  return names[static_cast<int>(d)];
}

Storage::Storage(size_t n) : data(storage_pool::acquire(n)), nbytes(n) {}
Storage::~Storage() { storage_pool::release(data, nbytes); }
uint64_t storage_allocation_count() { return storage_pool::stats().system_allocations; }

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  // Handles and blocks from the pools: a warm step makes them without calling malloc.
  auto impl = object_pool::make_shared<TensorImpl>();
  impl->storage = object_pool::make_shared<Storage>(shape.numel() * dtype_size(dtype));
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::shape_only(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  TF_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
           " values for shape ", shape);
  Tensor t = empty(shape, dtype);
  dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor Tensor::from_ids(const std::vector<int32_t>& ids, const Shape& shape) {
  TF_CHECK(static_cast<int64_t>(ids.size()) == shape.numel(), "from_ids: ", ids.size(), " ids for shape ", shape);
  Tensor t = empty(shape, DType::i32);
  std::copy(ids.begin(), ids.end(), t.data<int32_t>());
  return t;
}

void Tensor::fill(double value) const {
  dispatch(dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* p = data<T>();
    const T v = static_cast<T>(value);
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
  });
}

double Tensor::item() const {
  TF_CHECK(numel() == 1, "item() of tensor ", describe(), " which has ", numel(), " elements");
  return at(0);
}

double Tensor::at(int64_t i) const {
  TF_CHECK(i >= 0 && i < numel(), "index ", i, " out of range for ", describe());
  if (dtype() == DType::i32) return data<int32_t>()[i];
  return dispatch(dtype(), [&](auto zero) { return static_cast<double>(data<decltype(zero)>()[i]); });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out(numel());
  if (dtype() == DType::i32) {
    std::copy(data<int32_t>(), data<int32_t>() + numel(), out.begin());
    return out;
  }
  dispatch(dtype(), [&](auto zero) {
    const auto* p = data<decltype(zero)>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  });
  return out;
}

Tensor Tensor::view(const Shape& shape) const& {
  TF_CHECK(shape.numel() == numel(), "view: cannot view ", describe(), " as ", shape);
  auto v = object_pool::make_shared<TensorImpl>();
  v->storage = impl().storage;
  v->offset = impl().offset;
  v->shape = shape;
  v->dtype = dtype();
  return Tensor(std::move(v));
}

Tensor Tensor::view(const Shape& shape) && {
  Tensor v = static_cast<const Tensor&>(*this).view(shape);
  // A temporary that was the storage's only other holder: the view is now the sole owner, which
  // lets accumulate_grad adopt a backward's freshly computed gradient instead of copying it.
  if (impl_.use_count() == 1) impl_->storage.reset();
  return v;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype());
  std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

Tensor Tensor::detach() const { return view(shape()); }

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor t = empty(shape(), target);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  TF_CHECK(src.shape() == shape(), "copy_from: shape ", src.shape(), " into ", shape());
  dispatch(dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* dst = data<T>();
    dispatch(src.dtype(), [&](auto szero) {
      const auto* s = src.data<decltype(szero)>();
      for (int64_t i = 0, n = numel(); i < n; ++i) dst[i] = static_cast<T>(s[i]);
    });
  });
}

Tensor& Tensor::set_requires_grad(bool on) {
  impl().requires_grad = on;
  if (on && !impl().grad_slot) impl().grad_slot = object_pool::make_shared<GradSlot>();
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& i = impl();
  return i.grad_slot ? Tensor(i.grad_slot->grad) : Tensor();
}

Tensor& Tensor::set_name(std::string name) {
  impl().name = std::move(name);
  return *this;
}

std::string Tensor::describe() const {
  if (!impl_) return "<undefined>";
  std::string s = impl_->name.empty() ? "" : "'" + impl_->name + "' ";
  return s + shape().to_string() + " " + dtype_name(dtype());
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  TF_CHECK(a.shape() == b.shape(), op, ": shapes differ: ", a.shape(), " vs ", b.shape());
  check_same_dtype(op, a, b);
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TF_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", dtype_name(a.dtype()), " vs ",
           dtype_name(b.dtype()));
}

void check_floating(const char* op, const Tensor& t) {
  TF_CHECK(t.dtype() != DType::i32, op, ": needs a floating-point tensor (f32 or f64), got ", t.describe());
}

}  // namespace tf

// Tensor: a shaped, typed handle on shared, 64-byte-aligned, row-major storage.
//
// Sharing semantics (read this first):
//  - A Tensor is a handle. Copying a Tensor copies the handle: both copies are the same tensor,
//    with the same data, the same gradient and the same requires_grad flag.
//  - view()/reshape() give a new tensor over the same storage (no copy); writes through one are
//    visible through the other. Gradients are not shared between a tensor and its views.
//  - clone() copies the data into new storage; detach() shares the data but drops the gradient.
//  - Every tensor is contiguous. Ops that reorder elements (transpose, permute) write a new tensor.
//  - grad() is a separate tensor of the same shape and dtype, created by backward on first use.
//
// dtypes: f32 for training (fast kernels), f64 for gradient checks (reference kernels), i32 for
// token ids and targets (never differentiated).
//
//   Tensor x = Tensor::zeros({2, 3});          // (2, 3) float32
//   x.data<float>()[4] = 1.0f;                 // row 1, column 1
//   Tensor y = x.view({3, 2});                 // same storage
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/error.h"
#include "framework/shape.h"

namespace tf {

enum class DType { f32, f64, i32 };
const char* dtype_name(DType d);
inline size_t dtype_size(DType d) { return d == DType::f64 ? 8 : 4; }
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

// Calls f(float{}) or f(double{}) according to the dtype, so a kernel is written once as a template.
// Floating dtypes only: ops on token ids (i32) say so explicitly.
template <class F>
decltype(auto) dispatch(DType d, F&& f) {
  TF_CHECK(d != DType::i32, "this operation needs a floating-point tensor, got i32");
  if (d == DType::f32) return f(float{});
  return f(double{});
}

// A 64-byte-aligned block of bytes from the storage pool (framework/storage_pool.h): a training
// step asks for the same sizes every time, so after the first step every block is a reused one.
struct Storage {
  explicit Storage(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  std::byte* data = nullptr;
  size_t nbytes = 0;
};
uint64_t storage_allocation_count();  // blocks taken from the system (pool misses) in this process

class Tensor;
struct TensorImpl;

// Where a tensor's gradient lives, apart from its values: the tape's nodes hold a tensor's slot
// (GradRef, framework/autograd/tape.h) when they need only to hand it a gradient, so the tensor's
// storage is released as soon as no one needs its values (Note [gradient slots] in tape.h).
struct GradSlot {
  std::shared_ptr<TensorImpl> grad;  // same shape and dtype as the tensor; null until backward reaches it
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements, for views
  Shape shape;
  DType dtype = DType::f32;
  bool requires_grad = false;
  bool is_leaf = true;               // false when an op recorded on the tape produced it
  uint64_t tape_generation = 0;      // which tape recording produced it (0: none)
  std::shared_ptr<GradSlot> grad_slot;  // made when the tensor first requires grad; shared with GradRefs
  std::string name;                  // parameter path, e.g. "blocks.0.attn.qkv.weight"; may be empty
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories. empty() leaves the contents uninitialised.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32) { return full({}, value, dtype); }
  static Tensor from_ids(const std::vector<int32_t>& ids, const Shape& shape);  // i32 token ids
  // A shape and dtype without storage: a model built of these (layers::Init::shapes_only) lists its
  // parameters' names, shapes and count without allocating them. Reading its data throws.
  static Tensor shape_only(const Shape& shape, DType dtype = DType::f32);
  bool has_storage() const { return impl().storage != nullptr; }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return shape().rank(); }
  int64_t dim(int axis) const { return shape()[axis]; }
  int64_t numel() const { return shape().numel(); }
  DType dtype() const { return impl().dtype; }
  size_t nbytes() const { return numel() * dtype_size(dtype()); }

  template <class T>
  T* data() const {
    TF_CHECK(dtype() == dtype_of<T>(), "tensor ", describe(), " accessed as ", dtype_name(dtype_of<T>()));
    return reinterpret_cast<T*>(storage().data) + impl().offset;
  }
  void* raw_data() const { return storage().data + impl().offset * dtype_size(dtype()); }
  double item() const;                  // the single element of a one-element tensor
  double at(int64_t flat_index) const;  // any element, as double (slow; for tests and printing)
  std::vector<double> to_vector() const;

  Tensor view(const Shape& shape) const&;  // same storage, no autograd; numel must match
  Tensor view(const Shape& shape) &&;      // the same; a dying sole owner hands its storage over
  Tensor clone() const;                   // new storage, same values, no autograd history
  Tensor detach() const;                  // same storage, no gradient
  Tensor to(DType dtype) const;           // converted copy (or this tensor if already dtype)
  void copy_from(const Tensor& src) const;  // elementwise copy, shapes must match; not recorded
  void fill(double value) const;          // not recorded

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  Tensor grad() const;  // undefined until backward reaches it
  void zero_grad() {
    if (impl().grad_slot) impl().grad_slot->grad.reset();
  }
  const std::string& name() const { return impl().name; }
  Tensor& set_name(std::string name);

  std::string describe() const;  // "'name' (2, 3) f32" for error messages
  TensorImpl& impl() const {
    TF_CHECK(impl_, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  Storage& storage() const {
    TF_CHECK(impl().storage, "tensor ", describe(), " has a shape only, no values (Tensor::shape_only)");
    return *impl().storage;
  }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Throws, naming `op` and both shapes, unless a and b have the same shape and dtype.
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// Throws, naming `op` and the tensor, unless t is f32 or f64 (float ops refuse i32 token ids).
void check_floating(const char* op, const Tensor& t);

}  // namespace tf

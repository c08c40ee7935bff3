// Shape ops: reshape (a view, no copy), transpose and permute (contiguous copies), concat and split.
//
//   Tensor h = ops::reshape(x, {B, T, H, -1});          // (B, T, C) -> (B, T, H, D), D = C / H
//   Tensor q = ops::transpose(h, 1, 2);                 // (B, T, H, D) -> (B, H, T, D)
//   Tensor y = ops::permute(q, {0, 2, 1, 3});           // (B, H, T, D) -> (B, T, H, D)
//   auto qkv = ops::split(fused, {C, C, C}, -1);        // (B, T, 3C) -> 3 x (B, T, C)
//   Tensor both = ops::concat({a, b}, 0);               // (2, C) and (3, C) -> (5, C)
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory_resource>
#include <span>
#include <vector>

#include "framework/tensor.h"

namespace tf::ops {

// Same elements, new shape, same storage (see Tensor::view). One dimension may be -1: it is
// inferred from the element count.
Tensor reshape(const Tensor& x, std::span<const int64_t> dims);
Tensor reshape(const Tensor& x, std::initializer_list<int64_t> dims);  // lets {2, -1} pick this overload
Tensor reshape(const Tensor& x, const Shape& shape);

// Swaps two axes (negative axes count from the end); the result is a new contiguous tensor.
Tensor transpose(const Tensor& x, int axis0, int axis1);
// Output axis k is input axis order[k]; a new contiguous tensor.
Tensor permute(const Tensor& x, std::vector<int> order);

// Joins tensors along `axis`; all other dimensions (and the dtype) must agree.
Tensor concat(const std::vector<Tensor>& xs, int axis);
// Cuts x along `axis` into pieces of the given sizes, which must add up to x's dimension there.
// Outputs that receive no gradient count as zero in the backward pass. The list is pooled
// (framework/object_pool.h), so a layer's split costs no malloc in a warm training step.
std::pmr::vector<Tensor> split(const Tensor& x, std::span<const int64_t> sizes, int axis);
inline std::pmr::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> sizes, int axis) {
  return split(x, std::span<const int64_t>(sizes.begin(), sizes.size()), axis);
}

// The permute kernels, on raw buffers: out has dims in_shape[order[k]]. The reference walks one
// element at a time; the fast one copies contiguous runs and spreads rows over OpenMP threads.
// Exposed for the fast-versus-reference tests.
template <class T>
void permute_reference(const Shape& in_shape, const std::vector<int>& order, const T* x, T* out);
template <class T>
void permute_fast(const Shape& in_shape, const std::vector<int>& order, const T* x, T* out);

}  // namespace tf::ops

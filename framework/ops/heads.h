// Attention's head layout in one copy each way: the fused QKV projection's rows cut into heads, and
// the heads' outputs put side by side again.
//
//   auto qkv = ops::split_heads(fused, {H, G, G}, D);  // (B, T, (H + 2G) D) -> (B, H, T, D), 2 x (B, G, T, D)
//   Tensor y = ops::merge_heads(o);                     // (B, H, T, D) -> (B, T, H D)
//
// split_heads is split + reshape + transpose, and merge_heads transpose + reshape (see shape.h), with
// one copy instead of two in split_heads' forward and backward (a concat of three transposes).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory_resource>
#include <span>
#include <vector>

#include "framework/tensor.h"

namespace tf::ops {

// x (B, T, sum(heads) D) -> one (B, heads[i], T, D) tensor per group i, in order. Outputs that
// receive no gradient count as zero in the backward pass. The list comes from the object pool
// (framework/object_pool.h): attention calls this every step, and a warm step calls no malloc.
std::pmr::vector<Tensor> split_heads(const Tensor& x, std::span<const int64_t> heads, int64_t head_dim);
inline std::pmr::vector<Tensor> split_heads(const Tensor& x, std::initializer_list<int64_t> heads, int64_t head_dim) {
  return split_heads(x, std::span<const int64_t>(heads.begin(), heads.size()), head_dim);
}
// x (B, H, T, D) -> (B, T, H D).
Tensor merge_heads(const Tensor& x);

}  // namespace tf::ops

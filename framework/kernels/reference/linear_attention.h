// Reference kernel of linear attention's one primitive, the masked kernel product: plain loops in
// double over every (query, key) pair, O(T^2) per head. The oracle for kernels/cpu/linear_attention.h
// (the chunked O(T D^2) form) and the float64 path.
//
// T = time, A = width of a and b (a query's or key's features), C = width of c (values).
//
//   out[i, :] = sum over j in J(i) of (a[i] . b[j]) c[j, :]            a, b: (T, A)  c, out: (T, C)
//
// with J(i) = {j <= i} (ProductOrder::causal), {j >= i} (ProductOrder::anticausal) or every j
// (ProductOrder::full). Linear attention's forward and all three of its gradients are this product
// with the roles of q, k, v and the output's gradient exchanged (Note [linear attention] in
// framework/ops/linear_attention.h).
#pragma once
#include <cstdint>

namespace tf::kernels {

enum class ProductOrder { causal, anticausal, full };

// The product's arguments by name, for both kernels (as the attention kernels take theirs).
template <class T>
struct KernelProductArgs {
  ProductOrder order = ProductOrder::causal;
  int64_t seq_len = 0, a_width = 0, c_width = 0;  // T, A, C
  const T* a = nullptr;                           // (T, A)
  const T* b = nullptr;                           // (T, A)
  const T* c = nullptr;                           // (T, C)
  T* out = nullptr;                               // (T, C)
  // The chunked kernel's running state sum_j b[j] c[j]^T (A, C), carried from call to call when
  // decoding continues a sequence; null: its own, zeroed. The reference kernel ignores it.
  T* state = nullptr;
};

template <class T>
void kernel_product_reference(const KernelProductArgs<T>& args);

}  // namespace tf::kernels

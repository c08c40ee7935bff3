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

template <class T>
void kernel_product_reference(ProductOrder order, int64_t seq_len, int64_t a_width, int64_t c_width, const T* a,
                              const T* b, const T* c, T* out);

}  // namespace tf::kernels

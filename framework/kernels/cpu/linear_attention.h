// The masked kernel product of kernels/reference/linear_attention.h in chunks: O(T (K A + A C))
// per head for chunk size K instead of O(T^2 (A + C)). Positions are taken K at a time; within a
// chunk the pairs are summed directly, and everything before the chunk arrives through a running
// state S = sum_j b[j] c[j]^T, (A, C) (Katharopoulos et al. 2020, section 3.3; the chunked form of
// their prefix sum, as in Yang et al. 2024, "Gated Linear Attention", section 2.2):
//
//   out[i] = a[i]^T S_before_chunk + sum over j in the chunk, j <= i, of (a[i] . b[j]) c[j]
//   S += sum over j in the chunk of b[j] c[j]^T
//
// The anticausal order walks the chunks from the end; the full order is a[i]^T S_all.
// `state`, when given, is the running S (A, C) of the positions before this call: it starts the
// sum and is left holding the sum after it. Decoding one token at a time with it is the recurrent
// form of linear attention; tests/framework/linear_attention_test.cpp holds the two forms equal.
// Templated for float (training) and double (the tests' exact comparisons).
#pragma once
#include <cstdint>

#include "framework/kernels/reference/linear_attention.h"

namespace tf::kernels {

template <class T>
void kernel_product_chunked(const KernelProductArgs<T>& args);

}  // namespace tf::kernels

// Matrix multiplication kernels behind one narrow interface: raw pointers plus explicit dims.
//
//   C[b] (m x n) = op(A[b]) (m x k) . op(B[b]) (k x n)     (+ C[b] when accumulate)
//   op(A) = A^T when trans_a (A[b] is then stored k x m); likewise for B.
//
// All buffers are row-major and contiguous; A and C have `batch` matrices, B has `batch` or, when
// b_broadcast, one matrix shared by every batch (a weight). Three implementations:
//   matmul_reference  plain loops, float and double: the oracle and the fallback
//   matmul_onednn     oneDNN matmul primitive (float), cached by dims; the default fast path
//   matmul_blas       OpenBLAS cblas_sgemm, one call per batch entry (kept for comparison)
#pragma once
#include <cstdint>

namespace tf::kernels {

struct MatmulDims {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  bool b_broadcast = false;  // B is a single matrix used for every batch entry
  bool accumulate = false;   // C += product instead of C = product
};

template <class T>
void matmul_reference(const MatmulDims& d, const T* a, const T* b, T* c);
void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c);
void matmul_blas(const MatmulDims& d, const float* a, const float* b, float* c);

// The fast float path the ops use (oneDNN; see bench/micro for the measurement behind the choice).
inline void matmul_fast(const MatmulDims& d, const float* a, const float* b, float* c) {
  matmul_onednn(d, a, b, c);
}

}  // namespace tf::kernels

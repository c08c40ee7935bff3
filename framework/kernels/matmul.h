// Matrix multiplication kernels behind one narrow interface: raw pointers plus explicit dims.
//
//   C[b] (m x n) = op(A[b]) (m x k) . op(B[b]) (k x n)  (+ bias (n) on every row, when given)
//                                                        (+ C[b] when accumulate)
//   op(A) = A^T when trans_a (A[b] is then stored k x m); likewise for B.
//
// The bias is an argument rather than something the caller writes into C first and accumulates
// onto, which costs an extra write and read of C: at linear (2048, 384) -> 1152, writing the bias
// first ran at 0.905 of oneDNN with its own bias argument, passing it through runs at 1.003
// (bench_micro_matmul, one thread, CPU clock).
//
// All buffers are row-major and contiguous; A and C have `batch` matrices, B has `batch` or, when
// b_broadcast, one matrix shared by every batch (a weight). Three implementations:
//   matmul_reference  plain loops, float and double: the oracle and the fallback
//   matmul_onednn     oneDNN matmul primitive (float), cached by dims; the default fast path
//                     (under kernels::Bf16MatmulScope, on operands rounded to bfloat16)
//   matmul_blas       OpenBLAS cblas_sgemm, one call per batch entry; cblas_sgemv for one row
#pragma once
#include <cstdint>

#include "framework/kernels/mode.h"

namespace tf::kernels {

struct MatmulDims {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  bool b_broadcast = false;  // B is a single matrix used for every batch entry
  bool accumulate = false;   // C += product instead of C = product
};

template <class T>
void matmul_reference(const MatmulDims& d, const T* a, const T* b, T* c, const T* bias = nullptr);
void matmul_onednn(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias = nullptr);
void matmul_blas(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias = nullptr);

// The fast float path the ops use: oneDNN, at least as fast as OpenBLAS at every shape of
// bench/micro_matmul.cpp (one thread, CPU clock), and 20% faster on attention's batches (one call
// instead of one per entry; with two threads on a loaded machine, 10x: each BLAS call is a fork-join).
// One row (m = 1, batch 1: a linear layer decoding one token) is a matrix-vector product: the 24
// such products of a GPT-2-small-like decoding step (C = 384, 43 MB of weights) took 6.8 ms of CPU
// per token through oneDNN against 5.9 - 6.3 ms through sgemv at one thread, and at two threads on
// the loaded machine 50 - 68 ms against 6.7 ms (oneDNN's gemv spins at its barriers). A linear
// layer's (x W^T) goes to our own threaded gemv (cpu/gemv.h): OpenBLAS 0.3.21 does not know newer
// CPUs and falls back to its generic PRESCOTT sgemv on them (perf, Xeon model 207, 2026-12-01);
// other one-row products go to oneDNN, so no op calls OpenBLAS (cpu/gemv.cpp).
void matmul_one_row(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias);
// The same product whatever the number of threads (kernels::deterministic()): C's rows are cut into
// blocks by shape alone and each block is one single-threaded oneDNN call, so every element of C is
// summed by the same code in the same order on any thread. oneDNN's own threading may split k
// across threads when m and n are small, and gemv_threaded groups rows by thread.
void matmul_deterministic(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias = nullptr);
inline void matmul_fast(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias = nullptr) {
  if (deterministic()) return matmul_deterministic(d, a, b, c, bias);
  if (d.m == 1 && d.batch == 1 && !bf16_matmuls()) return matmul_one_row(d, a, b, c, bias);  // gemv is float32
  matmul_onednn(d, a, b, c, bias);
}

}  // namespace tf::kernels

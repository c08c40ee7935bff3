// Single-threaded float32 matrix-vector product over a block of rows (and optionally columns) of a
// row-major matrix: the building block of a decoding step's linear layers (gemv_threaded below).
//
//   y (n) = W x + bias,  W: n rows of k floats, row j at w + j * ldw (ldw >= k)
//
// ldw > k selects a block of columns of a wider matrix (a thread's share of a product whose inputs
// it computed itself). The reference is kernels::matmul_reference with m = 1 and trans_b
// (y = x W^T + bias); tests/framework/matmul_kernel_test.cpp holds this kernel to it on odd sizes.
//
// Why not OpenBLAS's sgemv on each thread's block: called inside our parallel region it would still
// consult its own threading, and this loop is as fast at one thread: 0.8 - 1.1x sgemv's speed on a
// (256, 384) matrix in L2 and 1.0 - 1.1x on (1536, 384) matrices streamed from DRAM (a side-by-side
// loop, five alternating rounds, loaded machine, 2026-11-30). Both stream at the memory's rate.
#pragma once
#include <cstdint>

namespace tf::kernels {

void gemv_fast(int64_t n, int64_t k, const float* w, int64_t ldw, const float* x, const float* bias, float* y);

// y (n) = W x + bias for a whole row-major W (n, k): gemv_fast over blocks of rows, one block per
// OpenMP thread (one thread below ~64 KB of weights, where a fork costs more than it saves). The
// single-row linear layer of a decoding step (kernels::matmul_fast with m = 1).
void gemv_threaded(int64_t n, int64_t k, const float* w, const float* x, const float* bias, float* y);

}  // namespace tf::kernels

// Register-tiled products of small blocks (C = A B, C += A B), the inner loops of the tiled
// (flash) attention kernels: plain loops that the compiler vectorises, no library call per block.
//
//   block_product<false>(m, n, k, a, a_row, a_col, b, ldb, c, ldc);  // C (m, n) = A (m, k) B (k, n)
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "framework/sanitize.h"

namespace tf::kernels::blocks {

constexpr int64_t kTileN = 16;  // columns of a register tile: two AVX2 vectors
constexpr int64_t kTileM = 6;   // rows of a register tile: 12 accumulators + 2 loads of B + 1 broadcast <= 16 ymm

inline int64_t padded(int64_t n) { return (n + kTileN - 1) / kTileN * kTileN; }

// Note [block products]
// ~~~~~~~~~~~~~~~~~~~~~
// C (m, n) = A (m, k) B (k, n), or C += A B when Accumulate. A is read through two strides,
// a(i, p) = a[i a_row + p a_col], so a transposed block (P^T, dS^T in backward) costs no copy; B and
// C are row-major with n a multiple of kTileN, B's padding columns zero. A register tile keeps
// kTileM x kTileN sums for the whole k loop and broadcasts one element of A per row against one
// contiguous row of B, so the innermost `omp simd` loop over 16 columns is two FMAs on registers.
// Measured (one thread, process CPU time, 64 x 64 x 32 and 64 x 32 x 64 blocks): 34-42 GFLOP/s,
// against 39-44 for cblas_sgemm on the same blocks, 15-22 for a row-at-a-time axpy loop (C through
// memory) and 8-11 for dot products over D (a horizontal sum per score).
template <int R, bool Accumulate>
TF_UNINSTRUMENTED  // Note [uninstrumented micro-kernels] (framework/sanitize.h)
inline void tile(int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c,
                 int64_t ldc) {
  float acc[R * kTileN];  // (R, kTileN)
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int j = 0; j < kTileN; ++j) acc[r * kTileN + j] = Accumulate ? c[r * ldc + j] : 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;  // (kTileN)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float ar = a[r * a_row + p * a_col];
#pragma omp simd
      for (int j = 0; j < kTileN; ++j) acc[r * kTileN + j] += ar * bp[j];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma omp simd
    for (int j = 0; j < kTileN; ++j) c[r * ldc + j] = acc[r * kTileN + j];
}

template <int R, bool Accumulate>
inline void tile_row(int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += kTileN) tile<R, Accumulate>(k, a, a_row, a_col, b + j, ldb, c + j, ldc);
}

template <bool Accumulate>
inline void block_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                   int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // The tiles run uninstrumented (Note [uninstrumented micro-kernels]); the spans they touch:
  // a(i, p) for i < m, p < k; B's rows p < k of n columns; C's rows i < m.
  if (k > 0) {
    check_addressable(a, ((m - 1) * a_row + (k - 1) * a_col + 1) * sizeof(float));
    check_addressable(b, ((k - 1) * ldb + n) * sizeof(float));
  }
  check_addressable(c, ((m - 1) * ldc + n) * sizeof(float));
  int64_t i = 0;
  for (; i + kTileM <= m; i += kTileM)
    tile_row<kTileM, Accumulate>(n, k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {  // the last m % kTileM rows
    case 1: return tile_row<1, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 2: return tile_row<2, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 3: return tile_row<3, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 4: return tile_row<4, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    case 5: return tile_row<5, Accumulate>(n, k, ai, a_row, a_col, b, ldb, ci, ldc);
    default: return;
  }
}

// A B operand of block_product: rows `ld` floats apart, padded(cols) of them readable.
struct Operand {
  const float* data;
  int64_t ld;
};

// src (rows, cols), its rows `ld` apart, as a B operand: itself when cols is already a multiple
// of kTileN, else a copy into dst (row stride padded(cols)) with zero padding columns. (Copying
// rows of a fused layout into contiguous blocks as well, Q, dO and K in backward, measured no
// faster: 3.05 against 3.03 ms for config A's backward, one thread, three runs each.)
inline Operand padded_block(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  const int64_t ldp = padded(cols);
  if (ldp == cols) return {src, ld};
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ldp, src + r * ld, cols * sizeof(float));
    std::fill(dst + r * ldp + cols, dst + (r + 1) * ldp, 0.0f);
  }
  return {dst, ldp};
}

}  // namespace tf::kernels::blocks

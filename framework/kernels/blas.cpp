// OpenBLAS path: one cblas_sgemm per batch entry (row-major, explicit transposes); cblas_sgemv for
// a single row. A peer for tests and bench_micro_matmul only: no op of tapeformer calls it, so
// Debian's OpenBLAS 0.3.21 choosing a generic kernel on CPUs newer than itself (it has no API to
// choose another after it loads; OPENBLAS_CORETYPE is read when the library is loaded) never slows a
// run.
#include <cblas.h>

#include "framework/kernels/matmul.h"

namespace tf::kernels {

void matmul_blas(const MatmulDims& d, const float* a, const float* b, float* c, const float* bias) {
  // BLAS has no bias: put it into C's rows first and accumulate onto them.
  if (bias)
    for (int64_t r = 0; r < d.batch * d.m; ++r)
      for (int64_t j = 0; j < d.n; ++j) c[r * d.n + j] = d.accumulate ? c[r * d.n + j] + bias[j] : bias[j];
  const float beta = d.accumulate || bias ? 1.0f : 0.0f;
  const auto ta = d.trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = d.trans_b ? CblasTrans : CblasNoTrans;
  const int lda = d.trans_a ? d.m : d.k, ldb = d.trans_b ? d.k : d.n;
  for (int64_t bi = 0; bi < d.batch; ++bi) {
    const float* ab = a + bi * d.m * d.k;  // (m, k), or (k, m) when trans_a
    const float* bb = b + (d.b_broadcast ? 0 : bi * d.k * d.n);  // (k, n), or (n, k) when trans_b
    float* cb = c + bi * d.m * d.n;  // (m, n)
    if (d.m == 1) {
      // One row (a decoding step): C = op(B)^T a is a matrix-vector product; sgemm would pack the
      // whole of B for it. a is a k-vector either way (a (1, k) or (k, 1) matrix).
      cblas_sgemv(CblasRowMajor, d.trans_b ? CblasNoTrans : CblasTrans, d.trans_b ? d.n : d.k,
                  d.trans_b ? d.k : d.n, 1.0f, bb, ldb, ab, 1, beta, cb, 1);
      continue;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, d.m, d.n, d.k, 1.0f, ab, lda, bb, ldb, beta, cb, d.n);
  }
}

}  // namespace tf::kernels

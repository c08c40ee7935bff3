// OpenBLAS path: one cblas_sgemm per batch entry (row-major, explicit transposes).
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
    cblas_sgemm(CblasRowMajor, ta, tb, d.m, d.n, d.k, 1.0f, a + bi * d.m * d.k, lda,
                b + (d.b_broadcast ? 0 : bi * d.k * d.n), ldb, beta,
                c + bi * d.m * d.n, d.n);
  }
}

}  // namespace tf::kernels

// Reference matmul: the textbook triple loop, accumulating in the element type.
#include "framework/kernels/matmul.h"

namespace tf::kernels {

template <class T>
void matmul_reference(const MatmulDims& d, const T* a, const T* b, T* c, const T* bias) {
  for (int64_t bi = 0; bi < d.batch; ++bi) {
    const T* A = a + bi * d.m * d.k;
    const T* B = b + (d.b_broadcast ? 0 : bi * d.k * d.n);
    T* C = c + bi * d.m * d.n;
    for (int64_t i = 0; i < d.m; ++i) {
      for (int64_t j = 0; j < d.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < d.k; ++p) {
          const T av = d.trans_a ? A[p * d.m + i] : A[i * d.k + p];
          const T bv = d.trans_b ? B[j * d.k + p] : B[p * d.n + j];
          sum += av * bv;
        }
        if (bias) sum += bias[j];
        C[i * d.n + j] = d.accumulate ? C[i * d.n + j] + sum : sum;
      }
    }
  }
}

template void matmul_reference<float>(const MatmulDims&, const float*, const float*, float*, const float*);
template void matmul_reference<double>(const MatmulDims&, const double*, const double*, double*, const double*);

}  // namespace tf::kernels

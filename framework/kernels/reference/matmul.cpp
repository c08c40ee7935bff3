// Reference matmul: the textbook triple loop, accumulating in the element type.
#include "framework/kernels/matmul.h"

#include "framework/sanitize.h"

namespace tf::kernels {

namespace {

// The loops, outside the sanitizers' per-access instrumentation (Note [uninstrumented micro-kernels]
// in framework/sanitize.h): matmul_reference checks the operands' whole spans first. The float64
// gradchecks run every product through here, and under ASan and UBSan this loop was a fifth of a
// model gradcheck's time.
template <class T>
TF_UNINSTRUMENTED void product(const MatmulDims& d, const T* a, const T* b, T* c, const T* bias) {
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

}  // namespace

template <class T>
void matmul_reference(const MatmulDims& d, const T* a, const T* b, T* c, const T* bias) {
  check_addressable(a, sizeof(T) * d.batch * d.m * d.k);
  check_addressable(b, sizeof(T) * (d.b_broadcast ? 1 : d.batch) * d.k * d.n);
  check_addressable(c, sizeof(T) * d.batch * d.m * d.n);
  if (bias) check_addressable(bias, sizeof(T) * d.n);
  product(d, a, b, c, bias);
}

template void matmul_reference<float>(const MatmulDims&, const float*, const float*, float*, const float*);
template void matmul_reference<double>(const MatmulDims&, const double*, const double*, double*, const double*);

}  // namespace tf::kernels

// The chunked masked kernel product (kernels/cpu/linear_attention.h).
#include "framework/kernels/cpu/linear_attention.h"

#include <algorithm>
#include <vector>

namespace tf::kernels {

namespace {

// Positions per chunk: the direct sums inside a chunk cost K (A + C) per position, the state's
// read and update 2 A C; K = 64 balances them at A = C = 32.
constexpr int64_t kChunk = 64;

template <class T>
T dot(const T* x, const T* y, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < n; ++d) sum += x[d] * y[d];
  return sum;
}

template <class T>
void axpy(T alpha, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t e = 0; e < n; ++e) y[e] += alpha * x[e];
}

}  // namespace

template <class T>
void kernel_product_chunked(const KernelProductArgs<T>& args) {
  // Plain names rather than a structured binding: the lambdas below use them, and clang 14 (the
  // ThreadSanitizer build, tests/tsan.sh) cannot capture a structured binding.
  const ProductOrder order = args.order;
  const int64_t seq_len = args.seq_len, A = args.a_width, C = args.c_width;
  const T *a = args.a, *b = args.b, *c = args.c;
  T* out = args.out;
  T* state = args.state;
  thread_local std::vector<T> own_state;  // keeps its capacity: no allocation after the first call
  if (!state) {
    own_state.assign(A * C, T(0));
    state = own_state.data();
  }
  T* S = state;  // (A, C)
  auto add_to_state = [&](int64_t j) {  // S += b[j] c[j]^T
    for (int64_t d = 0; d < A; ++d) axpy(b[j * A + d], c + j * C, S + d * C, C);
  };
  auto read_state = [&](int64_t i) {  // out[i] = a[i]^T S
    T* row = out + i * C;
    std::fill(row, row + C, T(0));
    for (int64_t d = 0; d < A; ++d) axpy(a[i * A + d], S + d * C, row, C);
  };
  if (order == ProductOrder::full) {
    for (int64_t j = 0; j < seq_len; ++j) add_to_state(j);
    for (int64_t i = 0; i < seq_len; ++i) read_state(i);
    return;
  }
  const bool causal = order == ProductOrder::causal;
  const int64_t chunks = (seq_len + kChunk - 1) / kChunk;
  for (int64_t n = 0; n < chunks; ++n) {
    const int64_t index = causal ? n : chunks - 1 - n;
    const int64_t begin = index * kChunk, end = std::min(seq_len, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) {
      read_state(i);
      const int64_t first = causal ? begin : i, last = causal ? i : end - 1;
      for (int64_t j = first; j <= last; ++j) axpy(dot(a + i * A, b + j * A, A), c + j * C, out + i * C, C);
    }
    for (int64_t j = begin; j < end; ++j) add_to_state(j);
  }
}

template void kernel_product_chunked<float>(const KernelProductArgs<float>&);
template void kernel_product_chunked<double>(const KernelProductArgs<double>&);

}  // namespace tf::kernels

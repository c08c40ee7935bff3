// Embedding gather and scatter-add; see reference/embedding.h.
#include "framework/kernels/reference/embedding.h"

#include <algorithm>

namespace tf::kernels {

template <class T>
void embedding_forward_reference(const T* weight, const int32_t* ids, int64_t n_ids, int64_t channels, T* out) {
  for (int64_t i = 0; i < n_ids; ++i) {
    const T* row = weight + static_cast<int64_t>(ids[i]) * channels;  // (C)
    std::copy(row, row + channels, out + i * channels);
  }
}

template <class T>
void embedding_backward_reference(const T* dout, const int32_t* ids, int64_t n_ids, int64_t channels, T* dweight) {
  // Serial over ids: two positions holding the same id add into the same row.
  for (int64_t i = 0; i < n_ids; ++i) {
    T* row = dweight + static_cast<int64_t>(ids[i]) * channels;  // (C)
    const T* g = dout + i * channels;                            // (C)
    for (int64_t c = 0; c < channels; ++c) row[c] += g[c];
  }
}

template void embedding_forward_reference<float>(const float*, const int32_t*, int64_t, int64_t, float*);
template void embedding_forward_reference<double>(const double*, const int32_t*, int64_t, int64_t, double*);
template void embedding_backward_reference<float>(const float*, const int32_t*, int64_t, int64_t, float*);
template void embedding_backward_reference<double>(const double*, const int32_t*, int64_t, int64_t, double*);

}  // namespace tf::kernels

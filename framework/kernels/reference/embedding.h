// Embedding lookup kernels: gather rows of a table by id, and scatter-add gradients back onto them.
// Plain loops on float and double; the lookup is a row copy and the scatter a row add, both
// memory-bound, so these are also the kernels float32 uses.
//
// Shapes: N = number of ids, V = vocabulary (table rows), C = channels. Ids must be in [0, V):
// the op checks them before calling (framework/ops/embedding.cpp).
#pragma once
#include <cstdint>

namespace tf::kernels {

// out[i] = weight[ids[i]].                                  weight (V, C), ids (N), out (N, C)
template <class T>
void embedding_forward_reference(const T* weight, const int32_t* ids, int64_t n_ids, int64_t channels, T* out);

// dweight[ids[i]] += dout[i]; repeated ids sum.            dout (N, C), dweight (V, C)
template <class T>
void embedding_backward_reference(const T* dout, const int32_t* ids, int64_t n_ids, int64_t channels, T* dweight);

}  // namespace tf::kernels

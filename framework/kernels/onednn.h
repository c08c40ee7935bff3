// The process's oneDNN engine and stream, created once on first use.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace tf::kernels {

dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();
// Number of primitives created so far (a steady-state training step must create none).
uint64_t onednn_primitives_created();
void count_onednn_primitive();
// Number of matmul_onednn calls so far (the allocation test bounds oneDNN's share per call).
uint64_t onednn_matmul_calls();

}  // namespace tf::kernels

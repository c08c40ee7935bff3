// Fast float32 attention kernels: batched oneDNN matmuls for Q K^T, P V and the backward products,
// with OpenMP row loops for the masked softmax and dS. Same interface and results as the reference
// kernels in kernels/reference/attention.h (see there for the math and Note [attention masks]).
//
// This is the "materialised" formulation: it holds the (B, H, T_q, T_k) score matrix in a per-thread
// workspace that grows to the largest problem seen and is reused. A tiled (flash) kernel that never
// forms S can replace these two functions without any change to ops/attention.cpp.
//
// Why batched oneDNN rather than a loop of cblas_sgemm over heads (measured, CPU time, causal
// forward + backward): at one thread they are within 20% of each other either way (B=16 H=4
// T=128 D=32: 30 vs 30 ms; B=8 H=8 T=256 D=64: 128 vs 151 ms); at two threads the per-head sgemm
// loop burns 15x the CPU time (OpenBLAS threads spin up and down around every small call).
#pragma once
#include "framework/kernels/reference/attention.h"

namespace tf::kernels {

void attention_forward_fast(const AttentionForwardArgs<float>& a);
void attention_backward_fast(const AttentionBackwardArgs<float>& a);

}  // namespace tf::kernels

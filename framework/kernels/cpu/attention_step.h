// The fast float32 kernel of a decoding step: attention of a few query rows over one key/value
// head, in `omp simd` loops (scores s_j = scale q.k_j over the visible keys, p = softmax(s),
// o = sum_j p_j v_j; Vaswani et al. 2017, eq. 1). Same arguments and results as
// attention_forward_reference with dims.batch = dims.kv_heads = 1, no key padding and no dropout;
// lse is written when not null, probs never. Single-threaded: ops::attention_append runs one call
// per (batch entry, key/value head) on each thread.
//
// Why not attention_forward_fast: for one query row its two oneDNN matmuls took 10 - 19 us each
// (ONEDNN_VERBOSE, loaded machine) for ~1 us of arithmetic, and every new key count created two
// more primitives; this loop reads each cached key and value once.
#pragma once
#include "framework/kernels/reference/attention.h"

namespace tf::kernels {

void attention_step_fast(const AttentionForwardArgs<float>& a);

}  // namespace tf::kernels

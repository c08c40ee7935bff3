// One decoding step (batch 1, one new token) of a whole attention layer or a whole GELU MLP, each in
// one parallel region (kernels/cpu/decode_step.h says why). Inference only; the layers take these
// when one_token_step() holds and fall back to their op-by-op path otherwise, which is also the
// reference these are tested against (tests/framework/decode_step_test.cpp).
//
// C = d_model, H = query heads, G = key/value heads, D = head size, F = hidden units.
//
//   if (ops::one_token_step(x)) y = ops::attention_layer_step(x, {qkv.weight, qkv.bias,
//                                                                 proj.weight, proj.bias}, ...);
#pragma once
#include <cstdint>

#include "framework/kernels/reference/activation.h"
#include "framework/kernels/reference/attention.h"
#include "framework/ops/attention_cache.h"
#include "framework/ops/rope.h"
#include "framework/tensor.h"

namespace tf::ops {

// True when x holds one float32 row (numel == its last dimension), the fast kernels are selected
// and nothing is being recorded.
bool one_token_step(const Tensor& x);

// Weights of two linear maps, in -> hidden -> out; biases may be undefined.
struct TwoLinears {
  Tensor in_weight, in_bias;    // qkv: ((H + 2G) D, C); fc: (F, C)
  Tensor out_weight, out_bias;  // proj: (C, H D); (C, F)
};

// x (1, 1, C) -> proj(attention(rope(qkv(x)))) (1, 1, C), as MultiHeadAttention's op path with a
// KV cache of batch 1: writes this position's keys and values into row cache.length of `cache`;
// causal, scale 1 / sqrt(D). `rope` null = no rotation; its position_offset is added to the
// cache's length, as the layer does.
// relative_bias: the T5 table (H, buckets) when the variant has buckets.
Tensor attention_layer_step(const Tensor& x, const TwoLinears& weights, int64_t heads, const KvBuffers& cache,
                            const RopeOptions* rope, const kernels::AttentionVariant& variant,
                            const Tensor& relative_bias = {});

// x (..., C) with one row -> proj(gelu(fc(x))), same shape.
Tensor gelu_mlp_step(const Tensor& x, const TwoLinears& weights, kernels::GeluApprox approx);

}  // namespace tf::ops

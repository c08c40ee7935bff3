// Fused float32 kernels of one decoding step (batch 1, one new token): a whole attention layer and
// a whole GELU MLP, each in one OpenMP parallel region.
//
// Why: decoding one token is a chain of matrix-vector products over ~40 MB of weights, and each
// op of the layer-by-layer path (qkv gemv, attention, output gemv, fc gemv, proj gemv) is a
// parallel region of its own: five forks and joins per block, ~2 us each at two threads, which
// cost a step ~5% (bench/bench_decode, config B). Here each thread takes a share of the layer's
// independent units (key/value groups; hidden units) end to end, and the output projection is
// split by its input columns: thread t computes W[:, cols_t] h[cols_t], and the P partial products
// are added after the region (in thread order, so a run is reproducible at a fixed thread count).
// Summing partials rounds differently from one gemv: tests/framework/decode_step_test.cpp holds
// both kernels to the layer-by-layer ops on odd sizes, within float32 rounding.
//
// C = d_model, H = query heads, G = key/value heads, D = head size, L = cache capacity, F = hidden.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/activation.h"
#include "framework/kernels/reference/attention.h"

namespace tf::kernels {

struct AttentionLayerStepArgs {
  int64_t d_model = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t cached = 0, capacity = 0;  // cache rows filled before this step (the new row goes there); L
  const float* x = nullptr;            // (C): the layer's input
  const float* w_qkv = nullptr;        // ((H + 2G) D, C): rows [queries (H D) | keys (G D) | values (G D)]
  const float* b_qkv = nullptr;        // ((H + 2G) D) or null
  const float* w_proj = nullptr;       // (C, H D)
  const float* b_proj = nullptr;       // (C) or null
  float* keys = nullptr;               // (G, L, D): row `cached` of each head is written here
  float* values = nullptr;             // (G, L, D)
  const float* rope_cos = nullptr;     // (D / 2): cos and sin of this position's RoPE angles, or null
  const float* rope_sin = nullptr;     //   (no rotation); pairs (2i, 2i + 1) as ops::rope
  AttentionVariant variant = {};
  const float* relative_bias = nullptr;  // T5 bias: (H, buckets) and the bucket of each distance, as in
  const int32_t* bucket_of = nullptr;    //   AttentionScores, for T_k = cached + 1
  float* out = nullptr;  // (C) = proj(attention(qkv(x)))
};

// Causal attention of the new token over rows 0 .. cached of the cache, scale 1 / sqrt(D).
void attention_layer_step_fast(const AttentionLayerStepArgs& a);

struct MlpStepArgs {
  int64_t d_model = 0, hidden = 0;
  GeluApprox approx = GeluApprox::tanh;
  const float* x = nullptr;       // (C)
  const float* w_fc = nullptr;    // (F, C)
  const float* b_fc = nullptr;    // (F) or null
  const float* w_proj = nullptr;  // (C, F)
  const float* b_proj = nullptr;  // (C) or null
  float* out = nullptr;           // (C) = proj(gelu(fc(x)))
};

void mlp_step_fast(const MlpStepArgs& a);

}  // namespace tf::kernels

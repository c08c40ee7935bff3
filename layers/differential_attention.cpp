// The differential mixer of MultiHeadAttention (Ye et al. 2024, "Differential Transformer"): the
// math is Note [differential attention] in framework/ops/differential_attention.h; the head layout
// is the one the paper's code uses, so one differential head replaces two softmax heads and the
// projections keep their shapes:
//
//   qkv = x W_qkv^T + b                      (B, T, (H + 2G) D), as for softmax attention
//   q, k, v = split_heads(qkv, 2D)           (B, H/2, T, 2D), (B, G/2, T, 2D), (B, G/2, T, 2D)
//   q1, q2 = the halves of q; k1, k2 of k    (B, H/2, T, D) and (B, G/2, T, D): softmax heads 2i, 2i + 1
//   (options on queries and keys: on (q1, k1) and (q2, k2), the D-wide heads; Note [attention layer options])
//   (RoPE: rotate q1, q2, k1, k2 by their positions)
//   o = (softmax(q1 k1^T / sqrt(D)) - lambda softmax(q2 k2^T / sqrt(D))) v     (B, H/2, T, 2D)
//   o = (1 - lambda_init) RMSNorm(o)         per head, over its 2D outputs (eq. 3)
//   y = concat_heads(o) W_O^T + b_O          (B, T, C), as for softmax attention
#include "framework/ops/differential_attention.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/shape.h"
#include "layers/attention.h"

namespace tf::layers {

void MultiHeadAttention::init_differential(Init& init) {
  const Options& o = options;
  TF_CHECK_INPUT(o.n_heads % 2 == 0 && kv_heads() % 2 == 0, "differential attention pairs heads: n_heads ",
                 o.n_heads, " and n_kv_heads ", kv_heads(), " must both be even");
  TF_CHECK_INPUT(o.attn_dropout == 0 && o.variant.relative_buckets == 0,
                 "differential attention takes no attention dropout and no T5 bias table");
  const int64_t D = head_dim();
  for (Tensor* t : {&lambda_q1, &lambda_k1, &lambda_q2, &lambda_k2}) *t = init.normal({D}, 0.1);  // as the paper's code
  subln = LayerNorm({.dim = 2 * D, .eps = 1e-5, .kind = kernels::NormKind::rms}, init);
}

Tensor MultiHeadAttention::differential(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                                        const ops::KvBuffers* cache) const {
  const int64_t H = options.n_heads, G = kv_heads(), D = head_dim();
  const auto parts = ops::split_heads(in_layer("qkv", [&] { return qkv.forward(x); }), {H / 2, G / 2, G / 2}, 2 * D);
  auto q = ops::split(parts[0], {D, D}, -1), k = ops::split(parts[1], {D, D}, -1);
  for (int half : {0, 1}) hooks.queries_and_keys(q[half], k[half]);
  Tensor v = parts[2];  // (B, G/2, T, 2D)
  hooks.values(v, ctx);
  if (options.rope) {
    ops::RopeOptions rope = options.rope_options;
    rope.position_offset += cache ? cache->next_position() : 0;
    for (Tensor* t : {&q[0], &q[1], &k[0], &k[1]}) *t = ops::rope(*t, rope);
  }
  const Tensor lambda = ops::differential_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, options.lambda_init);
  Tensor out;  // (B, H/2, T, 2D)
  if (cache) {
    out = ops::differential_attention_append(q[0], k[0], q[1], k[1], v, lambda, *cache, options.variant);
  } else {
    const ops::AttentionOptions attn{.causal = options.causal, .key_padding = key_padding, .variant = options.variant};
    Tensor weights;
    out = ops::differential_attention(q[0], k[0], q[1], k[1], v, lambda, attn,
                                      ctx.attention_weights ? &weights : nullptr);
    if (ctx.attention_weights) ctx.attention_weights->push_back(weights);
  }
  return ops::scale(subln.forward(out), 1.0 - options.lambda_init);
}

}  // namespace tf::layers

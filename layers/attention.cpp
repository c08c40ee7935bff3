// Multi-head self-attention layer; the math of each step is in attention.h.
#include "layers/attention.h"

#include "framework/ops/decode_step.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/linear_attention.h"
#include "framework/ops/shape.h"

namespace tf::layers {
namespace {

// o (B, H, T, D) with head h scaled by gate[h] (gate (H)) or gate[b, h] (gate (B, H)): Michel et al.
// 2019's MHAtt(x) = sum_h xi_h Att_h(x) W_O^h, since concat(o) W_O^T is the sum of each head's o_h
// times its D columns of W_O. A gate of 1 multiplies exactly, so the result equals the ungated one.
Tensor gate_heads(const Tensor& o, const Tensor& gate) {
  const int64_t B = o.dim(0), H = o.dim(1);
  const bool shared = gate.rank() == 1 && gate.dim(0) == H;
  const bool per_sequence = gate.rank() == 2 && gate.dim(0) == B && gate.dim(1) == H;
  TF_CHECK(shared || per_sequence, "MultiHeadAttention: a head gate must be (H) or (B, H) with H = ", H, ", B = ", B,
           ", got ", gate.describe());
  const Tensor g = shared ? ops::reshape(gate, {H, 1, 1}) : ops::reshape(gate, {B, H, 1, 1});
  return ops::mul(o, g);  // (B, H, T, D)
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const Options& o, Init& init) : options(o) {
  TF_CHECK_INPUT(o.n_heads > 0 && (o.head_dim > 0 || o.d_model % o.n_heads == 0), "d_model ", o.d_model,
                 " is not divisible by n_heads ", o.n_heads, " and no head_dim is given");
  TF_CHECK_INPUT(kv_heads() > 0 && o.n_heads % kv_heads() == 0, "n_heads ", o.n_heads,
                 " is not a multiple of n_kv_heads ", kv_heads());
  TF_CHECK_INPUT(!o.rope || head_dim() % 2 == 0, "RoPE needs an even head_dim, got ", head_dim());
  TF_CHECK_INPUT(o.mixer != MixerKind::linear || (kv_heads() == o.n_heads && !o.rope),
                 "linear attention takes one key/value head per query head and no RoPE");
  const int64_t qkv_out = (o.n_heads + 2 * kv_heads()) * head_dim();
  qkv = Linear({o.d_model, qkv_out, o.bias, o.init_std}, init);
  proj = Linear({o.n_heads * head_dim(), o.d_model, o.bias, o.proj_init_std}, init);
  if (o.variant.relative_buckets > 0) relative_bias = init.normal({o.n_heads, o.variant.relative_buckets}, o.init_std);
  if (o.mixer == MixerKind::differential) init_differential(init);
  hooks = AttentionHooks(o.layer, {o.d_model, o.n_heads, head_dim(), o.bias, o.ln_eps, o.init_std, kv_heads(), o.vocab_size},
                         init);
}

MultiHeadAttention::Heads MultiHeadAttention::project_heads(const Tensor& x, const Context& ctx, int64_t position_offset,
                                                            const SequenceShard* shard) const {
  const int64_t H = options.n_heads, G = kv_heads(), D = head_dim();
  // (B, T, (H + 2G) D) -> (B, H, T, D), (B, G, T, D), (B, G, T, D)
  const auto parts = ops::split_heads(in_layer("qkv", [&] { return qkv.forward(x); }), {H, G, G}, D);
  Heads out{parts[0], parts[1], parts[2]};
  hooks.queries_and_keys(out.queries, out.keys);
  hooks.values(out.values, ctx);
  if (options.rope) {
    ops::RopeOptions rope = options.rope_options;
    const auto rotate = [&](const Tensor& t, int64_t start) {  // (B, H, T, D), positions start ...
      ops::RopeOptions at = rope;
      at.position_offset += start;
      return ops::rope(t, at);
    };
    out.queries = per_chunk(out.queries, 2, shard, position_offset, rotate);
    out.keys = per_chunk(out.keys, 2, shard, position_offset, rotate);
  }
  return out;
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                                   const ops::KvBuffers* cache) const {
  Tensor out;  // (B, H, T, D)
  const Tensor gate = ctx.head_gate();  // (H), (B, H) or undefined
  if (cache) {
    TF_CHECK(options.causal && !key_padding.defined(),
             "MultiHeadAttention: decoding with a KV cache needs causal attention without padding");
    TF_CHECK(!ctx.training && !ctx.attention_weights,
             "MultiHeadAttention: decoding is inference only (no dropout, no attention weights)");
  }
  if (options.mixer == MixerKind::differential) {
    TF_CHECK_INPUT(!gate.defined(), "head gates (head importance, pruning) act on softmax heads; a differential "
                   "attention layer has none to gate");
    const Tensor merged = hooks.heads_output(ops::merge_heads(differential(x, key_padding, ctx, cache)), x);
    return in_layer("proj", [&] { return proj.forward(merged); });  // (B, T, H D) -> (B, T, C)
  }
  if (cache) {
    if (options.mixer == MixerKind::linear) {
      const Heads h = project_heads(x, ctx, cache->next_position());
      out = ops::linear_attention_append(h.queries, h.keys, h.values, cache->state);
    } else if (!gate.defined() && !hooks.any() && ops::one_token_step(x) && cache->keys.dim(0) == 1) {
      // The whole layer in one parallel region; it has no place for gates or the layer's options,
      // which take the path below.
      return ops::attention_layer_step(x, {qkv.weight, qkv.bias, proj.weight, proj.bias}, options.n_heads, *cache,
                                       options.rope ? &options.rope_options : nullptr, options.variant, relative_bias);
    } else {
      const Heads h = project_heads(x, ctx, cache->next_position());
      out = ops::attention_append(h.queries, h.keys, h.values, *cache, options.variant, relative_bias);
    }
  } else if (options.mixer == MixerKind::linear) {
    const Heads h = project_heads(x, ctx, 0);
    const ops::LinearAttentionOptions linear{.causal = options.causal, .key_padding = key_padding};
    out = ops::linear_attention(h.queries, h.keys, h.values, linear);
    if (ctx.attention_weights) ctx.attention_weights->push_back(ops::linear_attention_weights(h.queries, h.keys, linear));
  } else if (ctx.shard) {  // sequence parallel: this rank's chunks, the others' keys round the ring
    const Heads h = project_heads(x, ctx, 0, ctx.shard);
    out = ops::ring_attention(h.queries, h.keys, h.values, {.causal = options.causal, .layout = ctx.shard->layout, .variant = options.variant},
                              *ctx.shard->comm);
  } else {
    ops::AttentionOptions attn;
    attn.causal = options.causal;
    attn.key_padding = key_padding;
    attn.variant = options.variant;
    attn.relative_bias = relative_bias;
    if (ctx.training && options.attn_dropout > 0) {
      attn.dropout = options.attn_dropout;
      attn.dropout_seed = ctx.next_seed();
    }
    if (!hooks.touches_heads() && !gate.defined() && !ctx.attention_weights) {
      // The heads read in place from the fused projection (RoPE rotating its queries and keys in one
      // pass), the output written merged: no head copies.
      Tensor fused = in_layer("qkv", [&] { return qkv.forward(x); });  // (B, T, (H + 2G) D)
      if (options.rope) fused = ops::rope_heads(fused, options.n_heads + kv_heads(), head_dim(), options.rope_options);
      const Tensor merged = hooks.heads_output(ops::attention_qkv(fused, options.n_heads, kv_heads(), attn), x);
      return in_layer("proj", [&] { return proj.forward(merged); });
    }
    const Heads h = project_heads(x, ctx, 0);
    Tensor weights;
    out = ops::attention(h.queries, h.keys, h.values, attn, ctx.attention_weights ? &weights : nullptr);
    if (ctx.attention_weights) ctx.attention_weights->push_back(weights);
  }
  if (gate.defined()) out = gate_heads(out, gate);
  // (B, H, T, D) -> (B, T, H D): the heads side by side, then W_O mixes them.
  const Tensor merged = hooks.heads_output(ops::merge_heads(out), x);
  return in_layer("proj", [&] { return proj.forward(merged); });
}

void MultiHeadAttention::parameters(ParamList& out, const std::string& prefix) const {
  qkv.parameters(out, prefix + "qkv.");
  proj.parameters(out, prefix + "proj.");
  add_param(out, prefix + "relative_bias", relative_bias, ParamKind::embedding);
  for (auto [name, t] : {std::pair{"lambda_q1", &lambda_q1}, {"lambda_k1", &lambda_k1}, {"lambda_q2", &lambda_q2},
                         {"lambda_k2", &lambda_k2}})
    add_param(out, prefix + name, *t, ParamKind::norm);  // no weight decay, like a norm's scale
  if (subln.weight.defined()) subln.parameters(out, prefix + "subln.");
  hooks.parameters(out, prefix);
}

}  // namespace tf::layers

// attention: checks and dims, the kernel choice, forward and backward side by side.
// The math lives in kernels/reference/attention.h; this file only wires it to the tape.
#include "framework/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/attention.h"
#include "framework/kernels/cpu/flash_attention.h"
#include "framework/kernels/mode.h"
#include "framework/kernels/reference/attention.h"
#include "framework/ops/heads.h"

namespace tf::ops {

namespace {

using kernels::AttentionDims;
using kernels::AttentionMask;

// The dims of q (B, H, T_q, D), k (B, H_kv, T_k, D), v (B, H_kv, T_k, D_v), checked.
AttentionDims attention_dims(const Shape& q, const Shape& k, const Shape& v, const AttentionOptions& o) {
  TF_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
           "attention: q, k, v must be (B, H, T, D), got q ", q, ", k ", k, ", v ", v);
  AttentionDims d;
  d.batch = q[0];
  d.heads = q[1];
  d.q_len = q[2];
  d.head_dim = q[3];
  d.kv_heads = k[1];
  d.kv_len = k[2];
  d.value_dim = v[3];
  TF_CHECK(k[0] == d.batch && v[0] == d.batch && v[1] == d.kv_heads && v[2] == d.kv_len && k[3] == d.head_dim,
           "attention: expected q (B, H, T_q, D), k (B, H_kv, T_k, D), v (B, H_kv, T_k, D_v), got q ", q, ", k ", k,
           ", v ", v);
  TF_CHECK(d.kv_heads > 0 && d.heads % d.kv_heads == 0, "attention: query heads H = ", d.heads,
           " must be a multiple of key/value heads H_kv = ", d.kv_heads, " (q ", q, ", k ", k, ")");
  TF_CHECK(d.head_dim > 0 || o.scale != 0, "attention: head size D = 0 needs an explicit scale");
  d.scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  TF_CHECK(std::isfinite(d.scale), "attention: scale must be finite, got ", o.scale);
  TF_CHECK(o.dropout >= 0 && o.dropout < 1, "attention: dropout must be in [0, 1), got ", o.dropout);
  d.dropout = o.dropout;
  d.dropout_seed = o.dropout_seed;
  return d;
}

// key_padding (B, T_k) of 0/1 floats -> one byte per key, the kernels' form (any dtype works, so
// the float64 gradient checks can pass the same mask).
std::vector<uint8_t> key_keep_bytes(const Tensor& key_padding, const AttentionDims& d) {
  if (!key_padding.defined()) return {};
  TF_CHECK(key_padding.rank() == 2 && key_padding.dim(0) == d.batch && key_padding.dim(1) == d.kv_len,
           "attention: key_padding must be (B, T_k) = (", d.batch, ", ", d.kv_len, "), got ",
           key_padding.describe());
  std::vector<uint8_t> keep(key_padding.numel());
  dispatch(key_padding.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* m = key_padding.data<T>();
    for (size_t j = 0; j < keep.size(); ++j) {
      TF_CHECK(m[j] == 0 || m[j] == 1, "attention: key_padding holds 1 (real token) or 0 (padding), got ",
               m[j], " at flat index ", j);
      keep[j] = m[j] == 1;
    }
  });
  // A mask that hides nothing (a batch without padding: the MLM batcher's all-ones mask) is no mask:
  // the kernels then skip the per-block padding scans and the per-score keep test. The result is
  // the same; checked once per call, in one pass over B T_k bytes.
  if (std::all_of(keep.begin(), keep.end(), [](uint8_t k) { return k == 1; })) keep.clear();
  return keep;
}

AttentionMask make_mask(bool causal, const std::vector<uint8_t>& key_keep, const kernels::AttentionVariant& variant) {
  return AttentionMask::of(variant, causal, key_keep.empty() ? nullptr : key_keep.data());
}

kernels::AttentionScores make_scores(const kernels::AttentionVariant& variant, const Tensor& relative_bias,
                                     const std::vector<int32_t>& bucket_of) {
  kernels::AttentionScores scores = kernels::AttentionScores::of(variant);
  scores.relative_bias = relative_bias.defined() ? relative_bias.raw_data() : nullptr;
  scores.bucket_of = bucket_of.empty() ? nullptr : bucket_of.data();
  return scores;
}

// What both attention nodes save besides their inputs: the output, for delta = rowsum(dO * O), the
// lse from which P = exp(scale Q K^T - lse) is recomputed, and the mask and modifiers' state.
struct AttentionSaved {
  Tensor out;                     // (B, H, T_q, D_v), or (B, T_q, H D_v) for attention_qkv
  Tensor log_sum_exp;             // (B, H, T_q)
  AttentionDims dims;
  bool causal = false;
  std::vector<uint8_t> key_keep;  // (B, T_k) or empty
  kernels::AttentionVariant variant;
  Tensor relative_bias;            // saved input: (H, buckets) or undefined
  std::vector<int32_t> bucket_of;  // T5 bias: bucket of each distance, or empty

  // The backward arguments of float32 or float64 but the input pointers and their gradients.
  template <class T>
  kernels::AttentionBackwardArgs<T> backward_args(const Tensor& dout, Tensor& dbias) const {
    if (relative_bias.defined()) dbias = Tensor::zeros(relative_bias.shape(), relative_bias.dtype());
    return {.dims = dims, .mask = make_mask(causal, key_keep, variant),
            .scores = make_scores(variant, relative_bias, bucket_of), .out = out.data<T>(),
            .lse = log_sum_exp.data<T>(), .dout = dout.data<T>(),
            .drelative_bias = dbias.defined() ? dbias.data<T>() : nullptr};
  }
};

struct AttentionNode : Node, AttentionSaved {
  Tensor q, k, v;  // saved inputs
  const char* op_name() const override { return "attention"; }
  void backward() override {
    const Tensor dout = outputs[0].grad();
    Tensor dq = Tensor::empty(q.shape(), q.dtype()), dk = Tensor::empty(k.shape(), k.dtype()),
           dv = Tensor::empty(v.shape(), v.dtype()), dbias;
    dispatch(q.dtype(), [&](auto zero) {
      using T = decltype(zero);
      kernels::AttentionBackwardArgs<T> a = backward_args<T>(dout, dbias);
      a.queries = q.data<T>(), a.keys = k.data<T>(), a.values = v.data<T>();
      a.dqueries = dq.data<T>(), a.dkeys = dk.data<T>(), a.dvalues = dv.data<T>();
      attention_backward_kernel(a);
    });
    accumulate_grad(q, std::move(dq));
    accumulate_grad(k, std::move(dk));
    accumulate_grad(v, std::move(dv));
    if (dbias.defined()) accumulate_grad(relative_bias, std::move(dbias));
  }
};

// attention_qkv's flash path: Q, K, V read in place from qkv (B, T, (H + 2 H_kv) D), O written as
// (B, T, H D), and dQ, dK, dV written in place into dqkv, all through one FlashLayout.
struct QkvAttentionNode : Node, AttentionSaved {
  Tensor qkv;  // saved input
  kernels::FlashLayout layout;
  const char* op_name() const override { return "attention_qkv"; }
  void backward() override {
    const Tensor dout = outputs[0].grad();  // (B, T, H D)
    Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype()), dbias;
    kernels::AttentionBackwardArgs<float> a = backward_args<float>(dout, dbias);
    const int64_t q_width = dims.heads * dims.head_dim, k_width = dims.kv_heads * dims.head_dim;
    a.queries = qkv.data<float>(), a.keys = a.queries + q_width, a.values = a.keys + k_width;
    a.dqueries = dqkv.data<float>(), a.dkeys = a.dqueries + q_width, a.dvalues = a.dkeys + k_width;
    kernels::flash_attention_backward(a, layout);
    accumulate_grad(qkv, std::move(dqkv));
    if (dbias.defined()) accumulate_grad(relative_bias, std::move(dbias));
  }
};

// The layout of Q, K, V inside qkv (B, T, (H + 2 H_kv) D) and of O as (B, T, H D).
kernels::FlashLayout qkv_layout(const AttentionDims& d) {
  const int64_t width = (d.heads + 2 * d.kv_heads) * d.head_dim;  // one row of qkv
  const kernels::RowStrides in{.batch = d.q_len * width, .head = d.head_dim, .row = width};
  return {.queries = in, .keys = in, .values = in,
          .out = {.batch = d.q_len * d.heads * d.head_dim, .head = d.head_dim, .row = d.heads * d.head_dim}};
}

}  // namespace

void check_relative_bias(const char* op, const Tensor& bias, int64_t heads, const kernels::AttentionVariant& variant,
                         DType dtype) {
  if (variant.relative_buckets <= 0) {
    TF_CHECK(!bias.defined(), op, ": a relative_bias table needs variant.relative_buckets > 0");
    return;
  }
  TF_CHECK(bias.defined() && bias.shape() == Shape({heads, variant.relative_buckets}) && bias.dtype() == dtype, op,
           ": relative_bias must be (H, buckets) = (", heads, ", ", variant.relative_buckets, ") ", dtype_name(dtype),
           ", got ", bias.describe());
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                 Tensor* weights_out) {
  check_same_dtype("attention", q, k);
  check_same_dtype("attention", q, v);
  const AttentionDims d = attention_dims(q.shape(), k.shape(), v.shape(), options);
  std::vector<uint8_t> key_keep = key_keep_bytes(options.key_padding, d);
  check_relative_bias("attention", options.relative_bias, d.heads, options.variant, q.dtype());
  std::vector<int32_t> bucket_of = kernels::relative_bucket_table(options.variant, options.causal, d.kv_len);
  const AttentionMask mask = make_mask(options.causal, key_keep, options.variant);

  Tensor out = Tensor::empty({d.batch, d.heads, d.q_len, d.value_dim}, q.dtype());  // (B, H, T_q, D_v)
  Tensor lse = Tensor::empty({d.batch, d.heads, d.q_len}, q.dtype());              // (B, H, T_q)
  Tensor probs;                                                                     // (B, H, T_q, T_k)
  if (weights_out) probs = Tensor::empty({d.batch, d.heads, d.q_len, d.kv_len}, q.dtype());
  dispatch(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const kernels::AttentionForwardArgs<T> a{.dims = d, .mask = mask,
                                             .scores = make_scores(options.variant, options.relative_bias, bucket_of),
                                             .queries = q.data<T>(), .keys = k.data<T>(),
                                             .values = v.data<T>(), .out = out.data<T>(), .lse = lse.data<T>(),
                                             .probs = probs.defined() ? probs.data<T>() : nullptr};
    attention_forward_kernel(a);
  });
  if (weights_out) *weights_out = probs;

  if (needs_grad(q, k, v, options.relative_bias)) {
    auto node = std::make_unique<AttentionNode>();
    node->q = q;
    node->k = k;
    node->v = v;
    static_cast<AttentionSaved&>(*node) = {out, lse, d, options.causal, std::move(key_keep), options.variant,
                                           options.relative_bias, std::move(bucket_of)};
    record(std::move(node), {out});
  }
  return out;
}

Tensor attention_qkv(const Tensor& qkv, int64_t heads, int64_t kv_heads, const AttentionOptions& options) {
  TF_CHECK(qkv.rank() == 3 && heads > 0 && kv_heads > 0 && qkv.dim(2) % (heads + 2 * kv_heads) == 0,
           "attention_qkv: expected (B, T, (H + 2 H_kv) D) for H = ", heads, ", H_kv = ", kv_heads, ", got ",
           qkv.describe());
  const int64_t B = qkv.dim(0), T = qkv.dim(1), D = qkv.dim(2) / (heads + 2 * kv_heads);
  const AttentionDims d = attention_dims({B, heads, T, D}, {B, kv_heads, T, D}, {B, kv_heads, T, D}, options);
  std::vector<uint8_t> key_keep = key_keep_bytes(options.key_padding, d);
  const AttentionMask mask = make_mask(options.causal, key_keep, options.variant);
  if (qkv.dtype() != DType::f32 || !kernels::use_fast<float>() || !kernels::flash_attention_preferred(d, mask) ||
      qkv.numel() == 0) {
    const auto parts = split_heads(qkv, {heads, kv_heads, kv_heads}, D);  // the composition, with its copies
    return merge_heads(attention(parts[0], parts[1], parts[2], options));
  }
  check_relative_bias("attention_qkv", options.relative_bias, d.heads, options.variant, qkv.dtype());
  std::vector<int32_t> bucket_of = kernels::relative_bucket_table(options.variant, options.causal, d.kv_len);
  const kernels::FlashLayout layout = qkv_layout(d);
  Tensor out = Tensor::empty({B, T, heads * D}, qkv.dtype());  // (B, T, H D)
  Tensor lse = Tensor::empty({B, heads, T}, qkv.dtype());      // (B, H, T)
  const float* q = qkv.data<float>();
  kernels::flash_attention_forward({.dims = d, .mask = mask,
                                    .scores = make_scores(options.variant, options.relative_bias, bucket_of),
                                    .queries = q, .keys = q + heads * D, .values = q + (heads + kv_heads) * D,
                                    .out = out.data<float>(), .lse = lse.data<float>()},
                                   layout);
  if (needs_grad(qkv, options.relative_bias)) {
    auto node = std::make_unique<QkvAttentionNode>();
    node->qkv = qkv;
    node->layout = layout;
    static_cast<AttentionSaved&>(*node) = {out, lse, d, options.causal, std::move(key_keep), options.variant,
                                           options.relative_bias, std::move(bucket_of)};
    record(std::move(node), {out});
  }
  return out;
}

template <class T>
void attention_forward_kernel(const kernels::AttentionForwardArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>) {
    // The tiled kernel where it measured faster and wherever S would be large (flash_attention_preferred).
    if (kernels::use_fast<T>())
      return kernels::flash_attention_preferred(a.dims, a.mask) ? kernels::flash_attention_forward(a)
                                                                : kernels::attention_forward_fast(a);
  }
  kernels::attention_forward_reference(a);
}

template <class T>
void attention_backward_kernel(const kernels::AttentionBackwardArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>) {
    if (kernels::use_fast<T>())
      return kernels::flash_attention_preferred(a.dims, a.mask) ? kernels::flash_attention_backward(a)
                                                                : kernels::attention_backward_fast(a);
  }
  kernels::attention_backward_reference(a);
}

template void attention_forward_kernel<float>(const kernels::AttentionForwardArgs<float>&);
template void attention_forward_kernel<double>(const kernels::AttentionForwardArgs<double>&);
template void attention_backward_kernel<float>(const kernels::AttentionBackwardArgs<float>&);
template void attention_backward_kernel<double>(const kernels::AttentionBackwardArgs<double>&);

}  // namespace tf::ops

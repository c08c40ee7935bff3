// Fused decoding-step ops; see decode_step.h.
#include "framework/ops/decode_step.h"

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/decode_step.h"
#include "framework/kernels/mode.h"
#include "framework/ops/attention.h"
#include "framework/storage_pool.h"

namespace tf::ops {

namespace {

const float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// weight (rows, cols) float32 and bias (rows) or undefined.
void check_linear(const char* op, const Tensor& weight, const Tensor& bias, int64_t rows, int64_t cols) {
  TF_CHECK(weight.shape() == Shape({rows, cols}) && weight.dtype() == DType::f32, op, ": weight must be (", rows,
           ", ", cols, ") float32, got ", weight.describe());
  TF_CHECK(!bias.defined() || (bias.shape() == Shape({rows}) && bias.dtype() == DType::f32), op, ": bias must be (",
           rows, ") float32, got ", bias.describe());
}

}  // namespace

bool one_token_step(const Tensor& x) {
  return x.defined() && x.dtype() == DType::f32 && x.rank() >= 1 && x.numel() == x.dim(-1) &&
         kernels::use_fast<float>() && !grad_enabled();
}

Tensor attention_layer_step(const Tensor& x, const TwoLinears& w, int64_t heads, const KvBuffers& cache,
                            const RopeOptions* rope, const kernels::AttentionVariant& variant,
                            const Tensor& relative_bias) {
  TF_CHECK(one_token_step(x), "attention_layer_step: one float32 row under a NoGradGuard, got ", x.describe());
  const Tensor& keys = cache.keys;
  TF_CHECK(keys.rank() == 4 && keys.dim(0) == 1 && keys.dtype() == DType::f32 && cache.values.shape() == keys.shape(),
           "attention_layer_step: the cache must hold two (1, G, L, D) float32 buffers, got ", keys.describe());
  const int64_t C = x.dim(-1), G = keys.dim(1), L = keys.dim(2), D = keys.dim(3), H = heads;
  TF_CHECK(H > 0 && H % G == 0, "attention_layer_step: ", H, " heads are not a multiple of ", G, " key/value heads");
  TF_CHECK(cache.length >= 0 && cache.length < L, "attention_layer_step: ", cache.length,
           " cached positions leave no room in the capacity ", L);
  check_linear("attention_layer_step (qkv)", w.in_weight, w.in_bias, (H + 2 * G) * D, C);
  check_linear("attention_layer_step (proj)", w.out_weight, w.out_bias, C, H * D);
  RopeRow angles;
  if (rope) {
    RopeOptions at = *rope;
    at.position_offset += cache.next_position();
    angles = rope_row(D, at);
  }
  check_relative_bias("attention_layer_step", relative_bias, H, variant, DType::f32);
  storage_pool::Scratch<int32_t> bucket_of(variant.relative_buckets > 0 ? 2 * cache.length + 1 : 0);  // pooled
  kernels::relative_bucket_table(variant, true, cache.length + 1, bucket_of.data());
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  kernels::attention_layer_step_fast({.d_model = C, .heads = H, .kv_heads = G, .head_dim = D,
                                      .cached = cache.length, .capacity = L, .x = x.data<float>(),
                                      .w_qkv = w.in_weight.data<float>(), .b_qkv = data_or_null(w.in_bias),
                                      .w_proj = w.out_weight.data<float>(), .b_proj = data_or_null(w.out_bias),
                                      .keys = keys.data<float>(), .values = cache.values.data<float>(),
                                      .rope_cos = angles.cos, .rope_sin = angles.sin, .variant = variant,
                                      .relative_bias = relative_bias.defined() ? relative_bias.data<float>() : nullptr,
                                      .bucket_of = bucket_of.data(),
                                      .out = out.data<float>()});
  return out;
}

Tensor gelu_mlp_step(const Tensor& x, const TwoLinears& w, kernels::GeluApprox approx) {
  TF_CHECK(one_token_step(x), "gelu_mlp_step: one float32 row under a NoGradGuard, got ", x.describe());
  const int64_t C = x.dim(-1), F = w.in_weight.defined() && w.in_weight.rank() == 2 ? w.in_weight.dim(0) : 0;
  check_linear("gelu_mlp_step (fc)", w.in_weight, w.in_bias, F, C);
  check_linear("gelu_mlp_step (proj)", w.out_weight, w.out_bias, C, F);
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  kernels::mlp_step_fast({.d_model = C, .hidden = F, .approx = approx, .x = x.data<float>(),
                          .w_fc = w.in_weight.data<float>(), .b_fc = data_or_null(w.in_bias),
                          .w_proj = w.out_weight.data<float>(), .b_proj = data_or_null(w.out_bias),
                          .out = out.data<float>()});
  return out;
}

}  // namespace tf::ops

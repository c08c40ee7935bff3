// Attention over a KV cache; see attention_cache.h.
#include "framework/ops/attention_cache.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/cpu/attention.h"
#include "framework/kernels/cpu/attention_step.h"
#include "framework/kernels/mode.h"
#include "framework/ops/attention.h"
#include "framework/storage_pool.h"

namespace tf::ops {

namespace {

// dst (B, G, L, D) rows position .. position + T - 1 of every head = src (B, G, T, D).
void write_rows(const Tensor& dst, const Tensor& src, int64_t position) {
  const int64_t heads = src.dim(0) * src.dim(1), T = src.dim(2), D = src.dim(3), L = dst.dim(2);
  const size_t row_bytes = D * dtype_size(src.dtype());
  const auto* from = static_cast<const std::byte*>(src.raw_data());
  auto* to = static_cast<std::byte*>(dst.raw_data());
  for (int64_t h = 0; h < heads; ++h)
    std::memcpy(to + (h * L + position) * row_bytes, from + h * T * row_bytes, T * row_bytes);
}

}  // namespace

Tensor attention_append(const Tensor& queries, const Tensor& keys, const Tensor& values, const KvBuffers& cache,
                        const kernels::AttentionVariant& variant, const Tensor& relative_bias) {
  // Nothing here is recorded (the cache's writes are not ops), so a gradient would be silently wrong.
  TF_CHECK(!grad_enabled(), "attention_append is for inference: call it under a NoGradGuard");
  const Tensor& cache_k = cache.keys;
  TF_CHECK(cache_k.defined() && cache_k.rank() == 4 && cache.values.shape() == cache_k.shape() &&
               cache.values.dtype() == cache_k.dtype(),
           "attention_append: the cache must hold two (B, G, L, D) buffers, got ", cache_k.describe(), " and ",
           cache.values.describe());
  const int64_t B = cache_k.dim(0), G = cache_k.dim(1), L = cache_k.dim(2), D = cache_k.dim(3);
  TF_CHECK(queries.rank() == 4 && queries.dim(0) == B && queries.dim(3) == D && queries.dim(1) % G == 0 &&
               queries.dtype() == cache_k.dtype(),
           "attention_append: queries must be (B, H, T, D) = (", B, ", a multiple of ", G, ", T, ", D, ") ",
           dtype_name(cache_k.dtype()), ", got ", queries.describe());
  const int64_t H = queries.dim(1), T = queries.dim(2);
  const Shape kv_shape{B, G, T, D};
  TF_CHECK(keys.shape() == kv_shape && values.shape() == kv_shape && keys.dtype() == cache_k.dtype() &&
               values.dtype() == cache_k.dtype(),
           "attention_append: keys and values must be ", kv_shape, " ", dtype_name(cache_k.dtype()), ", got ",
           keys.describe(), " and ", values.describe());
  TF_CHECK(cache.length >= 0 && cache.length + T <= L, "attention_append: ", cache.length, " cached positions plus ",
           T, " new exceed the capacity ", L);
  write_rows(cache_k, keys, cache.length);
  write_rows(cache.values, values, cache.length);

  // One kernel call per (batch entry, key/value head): its cached keys are a contiguous (N, D) block
  // of the (B, G, L, D) buffer, and the group of H / G query heads that reads it is a contiguous
  // (H / G, T, D) block of the queries.
  kernels::AttentionDims d;
  d.heads = H / G;
  d.q_len = T;
  d.kv_len = cache.length + T;
  d.head_dim = D;
  d.value_dim = D;
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));
  check_relative_bias("attention_append", relative_bias, H, variant, queries.dtype());
  storage_pool::Scratch<int32_t> bucket_of(variant.relative_buckets > 0 ? 2 * d.kv_len - 1 : 0);  // pooled
  kernels::relative_bucket_table(variant, true, d.kv_len, bucket_of.data());
  const kernels::AttentionMask mask{.causal = true, .variant = variant, .model_heads = H,
                                    .relative_bias = relative_bias.defined() ? relative_bias.raw_data() : nullptr,
                                    .bucket_of = bucket_of.data()};
  Tensor out = Tensor::empty({B, H, T, D}, queries.dtype());  // (B, H, T, D)
  dispatch(queries.dtype(), [&](auto zero) {
    using Scalar = decltype(zero);
    auto pair_args = [&](int64_t pair, Scalar* lse) {  // pair = b G + g
      const int64_t b = pair / G, g = pair % G;
      const int64_t q_offset = (b * H + g * d.heads) * T * D, kv_offset = pair * L * D;
      kernels::AttentionMask group_mask = mask;
      group_mask.first_head = g * d.heads;  // the call sees query heads g H / G .. (g + 1) H / G - 1
      return kernels::AttentionForwardArgs<Scalar>{
          .dims = d, .mask = group_mask, .queries = queries.data<Scalar>() + q_offset,
          .keys = cache_k.data<Scalar>() + kv_offset, .values = cache.values.data<Scalar>() + kv_offset,
          .out = out.data<Scalar>() + q_offset, .lse = lse};
    };
    if constexpr (std::is_same_v<Scalar, float>) {
      if (kernels::use_fast<Scalar>() && T == 1) {
#pragma omp parallel for schedule(static) if (B * G > 1)
        for (int64_t pair = 0; pair < B * G; ++pair) kernels::attention_step_fast(pair_args(pair, nullptr));
        return;
      }
    }
    storage_pool::Scratch<Scalar> lse(d.heads * T);  // (H / G, T): the kernels' log-sum-exp, unused here
    for (int64_t pair = 0; pair < B * G; ++pair) {
      if constexpr (std::is_same_v<Scalar, float>) {
        if (kernels::use_fast<Scalar>()) {
          kernels::attention_forward_fast(pair_args(pair, lse.data()));
          continue;
        }
      }
      kernels::attention_forward_reference(pair_args(pair, lse.data()));
    }
  });
  return out;
}

}  // namespace tf::ops

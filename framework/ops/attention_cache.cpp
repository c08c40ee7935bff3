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
  const Tensor& cache_v = cache.values;
  TF_CHECK(cache_k.defined() && cache_k.rank() == 4 && cache_v.defined() && cache_v.rank() == 4 &&
               cache_v.dim(0) == cache_k.dim(0) && cache_v.dim(1) == cache_k.dim(1) &&
               cache_v.dim(2) == cache_k.dim(2) && cache_v.dtype() == cache_k.dtype(),
           "attention_append: the cache must hold (B, G, L, D) keys and (B, G, L, Dv) values, got ",
           cache_k.describe(), " and ", cache_v.describe());
  const int64_t B = cache_k.dim(0), G = cache_k.dim(1), L = cache_k.dim(2), D = cache_k.dim(3), Dv = cache_v.dim(3);
  TF_CHECK(queries.rank() == 4 && queries.dim(0) == B && queries.dim(3) == D && queries.dim(1) % G == 0 &&
               queries.dtype() == cache_k.dtype(),
           "attention_append: queries must be (B, H, T, D) = (", B, ", a multiple of ", G, ", T, ", D, ") ",
           dtype_name(cache_k.dtype()), ", got ", queries.describe());
  const int64_t H = queries.dim(1), T = queries.dim(2);
  const Shape key_shape{B, G, T, D}, value_shape{B, G, T, Dv};
  TF_CHECK(keys.shape() == key_shape && values.shape() == value_shape && keys.dtype() == cache_k.dtype() &&
               values.dtype() == cache_k.dtype(),
           "attention_append: keys and values must be ", key_shape, " and ", value_shape, " ",
           dtype_name(cache_k.dtype()), ", got ", keys.describe(), " and ", values.describe());
  TF_CHECK(cache.length >= 0 && cache.length + T <= L, "attention_append: ", cache.length, " cached positions plus ",
           T, " new exceed the capacity ", L);
  write_rows(cache_k, keys, cache.length);
  write_rows(cache_v, values, cache.length);

  // One kernel call per (batch entry, key/value head): its cached keys and values are contiguous
  // (N, D) and (N, Dv) blocks of the buffers, and the group of H / G query heads that reads them is
  // a contiguous (H / G, T, D) block of the queries.
  kernels::AttentionDims d;
  d.heads = H / G;
  d.q_len = T;
  d.kv_len = cache.length + T;
  d.head_dim = D;
  d.value_dim = Dv;
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));
  check_relative_bias("attention_append", relative_bias, H, variant, queries.dtype());
  storage_pool::Scratch<int32_t> bucket_of(variant.relative_buckets > 0 ? 2 * d.kv_len - 1 : 0);  // pooled
  kernels::relative_bucket_table(variant, true, d.kv_len, bucket_of.data());
  const kernels::AttentionMask mask = kernels::AttentionMask::of(variant, true);
  kernels::AttentionScores scores = kernels::AttentionScores::of(variant);
  scores.model_heads = H;
  scores.relative_bias = relative_bias.defined() ? relative_bias.raw_data() : nullptr;
  scores.bucket_of = bucket_of.data();
  Tensor out = Tensor::empty({B, H, T, Dv}, queries.dtype());  // (B, H, T, Dv)
  dispatch(queries.dtype(), [&](auto zero) {
    using Scalar = decltype(zero);
    auto pair_args = [&](int64_t pair, Scalar* lse) {  // pair = b G + g
      const int64_t b = pair / G, g = pair % G;
      const int64_t q_row = (b * H + g * d.heads) * T;  // first query row of the group
      kernels::AttentionScores group_scores = scores;
      group_scores.first_head = g * d.heads;  // the call sees query heads g H / G .. (g + 1) H / G - 1
      return kernels::AttentionForwardArgs<Scalar>{
          .dims = d, .mask = mask, .scores = group_scores, .queries = queries.data<Scalar>() + q_row * D,
          .keys = cache_k.data<Scalar>() + pair * L * D, .values = cache_v.data<Scalar>() + pair * L * Dv,
          .out = out.data<Scalar>() + q_row * Dv, .lse = lse};
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

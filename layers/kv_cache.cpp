// KV cache; see kv_cache.h.
//
// B = batch, H = query heads, G = key/value heads, L = capacity, D = head size, T = new positions,
// N = length() + T, the positions attended to.
#include "layers/kv_cache.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "framework/kernels/cpu/attention.h"
#include "framework/kernels/cpu/exp.h"
#include "framework/kernels/mode.h"

namespace tf::layers {

KvCache::KvCache(const Options& o) : options_(o) {
  TF_CHECK(o.n_layers > 0 && o.batch > 0 && o.kv_heads > 0 && o.capacity > 0 && o.head_dim > 0,
           "KvCache: n_layers, batch, kv_heads, capacity and head_dim must be positive, got ", o.n_layers, ", ",
           o.batch, ", ", o.kv_heads, ", ", o.capacity, ", ", o.head_dim);
  TF_CHECK(o.dtype != DType::i32, "KvCache: keys and values are floating point, got i32");
  layers_.resize(o.n_layers);
  // Zeros rather than empty(): the rows past length() are never read, but a kernel that swept a
  // whole buffer would then meet finite numbers, not whatever the allocator left.
  for (Layer& layer : layers_) {
    layer.keys = Tensor::zeros({o.batch, o.kv_heads, o.capacity, o.head_dim}, o.dtype);    // (B, G, L, D)
    layer.values = Tensor::zeros({o.batch, o.kv_heads, o.capacity, o.head_dim}, o.dtype);  // (B, G, L, D)
  }
}

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

Tensor KvCache::append_and_attend(int64_t layer, const Tensor& queries, const Tensor& keys, const Tensor& values) {
  const Options& o = options_;
  TF_CHECK(layer >= 0 && layer < o.n_layers, "KvCache: layer ", layer, " out of range for ", o.n_layers, " layers");
  TF_CHECK(queries.rank() == 4 && queries.dim(0) == o.batch && queries.dim(3) == o.head_dim &&
               queries.dim(1) % o.kv_heads == 0 && queries.dtype() == o.dtype,
           "KvCache: queries must be (B, H, T, D) = (", o.batch, ", a multiple of ", o.kv_heads, ", T, ", o.head_dim,
           ") ", dtype_name(o.dtype), ", got ", queries.describe());
  const int64_t B = o.batch, H = queries.dim(1), G = o.kv_heads, T = queries.dim(2), D = o.head_dim;
  const Shape kv_shape{B, G, T, D};
  TF_CHECK(keys.shape() == kv_shape && values.shape() == kv_shape && keys.dtype() == o.dtype &&
               values.dtype() == o.dtype,
           "KvCache: keys and values must be ", kv_shape, " ", dtype_name(o.dtype), ", got ", keys.describe(), " and ",
           values.describe());
  TF_CHECK(length_ + T <= o.capacity, "KvCache: ", length_, " cached positions plus ", T, " new exceed the capacity ",
           o.capacity, " (clear() the cache and run a shorter context)");
  const Layer& buffers = layers_[layer];
  write_rows(buffers.keys, keys, length_);
  write_rows(buffers.values, values, length_);

  // One kernel call per (batch entry, key/value head): its cached keys are a contiguous (N, D)
  // block of the (B, G, L, D) buffer, and the group of H / G query heads that reads it is a
  // contiguous (H / G, T, D) block of the queries. The kernels take the same arguments as
  // ops::attention's: queries at the last T of N positions, causal (Note [attention masks]).
  kernels::AttentionDims d;
  d.batch = 1;
  d.heads = H / G;
  d.kv_heads = 1;
  d.q_len = T;
  d.kv_len = length_ + T;
  d.head_dim = D;
  d.value_dim = D;
  d.scale = 1.0 / std::sqrt(static_cast<double>(D));  // as ops::attention: Vaswani et al. 2017, eq. 1
  const kernels::AttentionMask mask{.causal = true};
  Tensor out = Tensor::empty({B, H, T, D}, o.dtype);  // (B, H, T, D)
  dispatch(o.dtype, [&](auto zero) {
    using Scalar = decltype(zero);
    std::vector<Scalar> lse(d.heads * T);  // (H / G, T): the kernels' log-sum-exp, unused here
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < G; ++g) {
        const int64_t q_offset = (b * H + g * d.heads) * T * D, kv_offset = (b * G + g) * o.capacity * D;
        const Scalar* q = queries.data<Scalar>() + q_offset;
        const Scalar* k = buffers.keys.data<Scalar>() + kv_offset;
        const Scalar* v = buffers.values.data<Scalar>() + kv_offset;
        Scalar* y = out.data<Scalar>() + q_offset;
        const kernels::AttentionForwardArgs<Scalar> a{
            .dims = d, .mask = mask, .queries = q, .keys = k, .values = v, .out = y, .lse = lse.data()};
        if constexpr (std::is_same_v<Scalar, float>) {
          if (kernels::use_fast<Scalar>()) {
            if (T == 1)
              attention_step_fast(d, mask, q, k, v, y);
            else
              kernels::attention_forward_fast(a);
            continue;
          }
        }
        kernels::attention_forward_reference(a);
      }
    }
  });
  return out;
}

void attention_step_fast(const kernels::AttentionDims& d, const kernels::AttentionMask& mask, const float* q,
                         const float* k, const float* v, float* out) {
  TF_CHECK(d.batch == 1 && d.kv_heads == 1 && !mask.key_keep && d.dropout == 0,
           "attention_step_fast: one key/value head, no padding, no dropout");
  const int64_t D = d.head_dim, Dv = d.value_dim;
  const float scale = static_cast<float>(d.scale);
  thread_local std::vector<float> scores;  // (T_k), reused across steps
  if (static_cast<int64_t>(scores.size()) < d.kv_len) scores.resize(d.kv_len);
  float* s = scores.data();
  for (int64_t r = 0; r < d.heads * d.q_len; ++r) {
    const int64_t i = r % d.q_len, begin = mask.key_begin(d, i), end = mask.key_end(d, i);
    const float* qi = q + r * D;
    float* oi = out + r * Dv;  // (D_v)
    for (int64_t c = 0; c < Dv; ++c) oi[c] = 0;
    if (end <= begin) continue;  // no visible key: output 0 (Note [attention masks])
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = begin; j < end; ++j) {
      const float* kj = k + j * D;
      float dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < D; ++c) dot += qi[c] * kj[c];
      s[j] = scale * dot;
      max = s[j] > max ? s[j] : max;
    }
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = begin; j < end; ++j) {
      s[j] = kernels::exp_fast(s[j] - max);  // <= 1: the max is subtracted so nothing overflows
      sum += s[j];
    }
    const float inv_sum = 1.0f / sum;
    for (int64_t j = begin; j < end; ++j) {
      const float p = s[j] * inv_sum;
      const float* vj = v + j * Dv;
#pragma omp simd
      for (int64_t c = 0; c < Dv; ++c) oi[c] += p * vj[c];
    }
  }
}

void KvCache::advance(int64_t t) {
  TF_CHECK(t >= 0 && length_ + t <= options_.capacity, "KvCache: cannot advance ", length_, " positions by ", t,
           " past the capacity ", options_.capacity);
  length_ += t;
}

}  // namespace tf::layers

// The fused decoding-step ops (framework/ops/decode_step.h) against the layer-by-layer ops they
// replace, run in float64 on the reference kernels: a whole attention layer with its KV cache (heads,
// grouped queries, RoPE, ALiBi, a window, biases or none) and a whole GELU MLP, on odd sizes on
// both sides of the size where the kernels fork threads.
#include <gtest/gtest.h>

#include <omp.h>

#include "framework/autograd/tape.h"
#include "framework/kernels/mode.h"
#include "framework/ops/activation.h"
#include "framework/ops/decode_step.h"
#include "framework/ops/heads.h"
#include "framework/ops/matmul.h"
#include "framework/random.h"
#include "support/compare.h"
#include "support/errors.h"

namespace tf {
namespace {

struct AttentionCase {
  int64_t C, H, G, D;
  bool bias, rope;
  kernels::AttentionVariant variant;
};

Tensor or_none(const Tensor& t, DType dtype) { return t.defined() ? t.to(dtype) : Tensor(); }

// One step at position `cache.length` through ops::linear, split_heads, rope, attention_append,
// merge_heads and linear: what MultiHeadAttention does for a longer chunk.
Tensor layer_by_layer(const Tensor& x, const ops::TwoLinears& w, int64_t H, int64_t G, int64_t D,
                      const ops::KvBuffers& cache, bool rope, const kernels::AttentionVariant& variant) {
  const auto parts = ops::split_heads(ops::linear(x, w.in_weight, w.in_bias), {H, G, G}, D);
  Tensor q = parts[0], k = parts[1];
  if (rope) {
    q = ops::rope(q, {.position_offset = cache.length});
    k = ops::rope(k, {.position_offset = cache.length});
  }
  const Tensor heads = ops::attention_append(q, k, parts[2], cache, variant);
  return ops::linear(ops::merge_heads(heads), w.out_weight, w.out_bias);
}

TEST(AttentionLayerStep, MatchesTheLayerByLayerOpsInFloat64) {
  NoGradGuard no_grad;
  const int64_t L = 9;
  const std::vector<AttentionCase> cases = {
      {17, 3, 1, 6, true, false, {}},         // below the fork threshold: one thread
      {17, 3, 3, 6, false, true, {}},         // RoPE, no biases
      {63, 6, 2, 28, true, true, {}},         // forks; grouped queries
      {129, 4, 1, 34, true, false, {}},       // forks, one group: the second thread has no heads
      {63, 6, 3, 28, true, false, {.window = 3, .alibi = true}},
  };
  Rng rng(11);
  for (const AttentionCase& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "C " << c.C << " H " << c.H << " G " << c.G << " D " << c.D
                                        << " threads " << threads);
      omp_set_num_threads(threads);
      const int64_t rows = (c.H + 2 * c.G) * c.D;
      const ops::TwoLinears w{randn({rows, c.C}, rng, 0.2), c.bias ? randn({rows}, rng, 0.5) : Tensor(),
                              randn({c.C, c.H * c.D}, rng, 0.2), c.bias ? randn({c.C}, rng, 0.5) : Tensor()};
      const ops::TwoLinears w64{w.in_weight.to(DType::f64), or_none(w.in_bias, DType::f64),
                                w.out_weight.to(DType::f64), or_none(w.out_bias, DType::f64)};
      ops::KvBuffers cache{Tensor::zeros({1, c.G, L, c.D}), Tensor::zeros({1, c.G, L, c.D}), 0};
      ops::KvBuffers cache64{Tensor::zeros({1, c.G, L, c.D}, DType::f64), Tensor::zeros({1, c.G, L, c.D}, DType::f64),
                             0};
      const ops::RopeOptions rope;
      for (int64_t position = 0; position < 6; ++position) {
        SCOPED_TRACE(::testing::Message() << "position " << position);
        const Tensor x = randn({1, 1, c.C}, rng);
        const Tensor got = ops::attention_layer_step(x, w, c.H, cache, c.rope ? &rope : nullptr, c.variant);
        const Tensor want = layer_by_layer(x.to(DType::f64), w64, c.H, c.G, c.D, cache64, c.rope, c.variant);
        // Sums of C and H D products of O(1) terms in float32: ~1e-6 relative to the output's scale.
        EXPECT_TRUE(testing::all_close(got, want, 2e-5, 2e-5));
        // The row appended to the cache is the rotated key and the value, as the op path writes them.
        EXPECT_TRUE(testing::all_close(cache.keys, cache64.keys, 2e-5, 2e-5));
        EXPECT_TRUE(testing::all_close(cache.values, cache64.values, 2e-5, 2e-5));
        ++cache.length;
        ++cache64.length;
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(GeluMlpStep, MatchesTheLayerByLayerOpsInFloat64) {
  NoGradGuard no_grad;
  Rng rng(12);
  for (auto [C, F] : {std::pair<int64_t, int64_t>{3, 5}, {17, 63}, {63, 257}, {129, 17}})
    for (bool bias : {true, false})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "C " << C << " F " << F << " bias " << bias << " threads " << threads);
        omp_set_num_threads(threads);
        const ops::TwoLinears w{randn({F, C}, rng, 0.3), bias ? randn({F}, rng) : Tensor(), randn({C, F}, rng, 0.3),
                                bias ? randn({C}, rng) : Tensor()};
        const Tensor x = randn({1, 1, C}, rng);
        for (auto approx : {kernels::GeluApprox::tanh, kernels::GeluApprox::erf}) {
          const Tensor got = ops::gelu_mlp_step(x, w, approx);
          const Tensor x64 = x.to(DType::f64);
          const Tensor want = ops::linear(ops::gelu(ops::linear(x64, w.in_weight.to(DType::f64),
                                                                or_none(w.in_bias, DType::f64)), approx),
                                          w.out_weight.to(DType::f64), or_none(w.out_bias, DType::f64));
          EXPECT_TRUE(testing::all_close(got, want, 2e-5, 2e-5));
        }
      }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(DecodeStep, OnlyOneFloatRowWithoutGradients) {
  Rng rng(13);
  const Tensor row = randn({1, 1, 8}, rng);
  EXPECT_FALSE(ops::one_token_step(row)) << "grad mode is on: a training forward takes the op path";
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(ops::one_token_step(row));
    EXPECT_FALSE(ops::one_token_step(randn({1, 2, 8}, rng)));
    EXPECT_FALSE(ops::one_token_step(row.to(DType::f64)));
    kernels::ReferenceKernelsGuard reference;
    EXPECT_FALSE(ops::one_token_step(row));
  }
  const ops::TwoLinears w{randn({5, 8}, rng), Tensor(), randn({8, 5}, rng), Tensor()};
  testing::expect_error([&] { ops::gelu_mlp_step(randn({1, 2, 8}, rng), w, kernels::GeluApprox::tanh); }, "one float32 row");
  NoGradGuard no_grad;
  const ops::TwoLinears wrong{randn({5, 7}, rng), Tensor(), randn({8, 5}, rng), Tensor()};
  testing::expect_error([&] { ops::gelu_mlp_step(row, wrong, kernels::GeluApprox::tanh); }, "weight must be (5, 8)");
  ops::KvBuffers full{Tensor::zeros({1, 1, 2, 4}), Tensor::zeros({1, 1, 2, 4}), 2};
  const ops::TwoLinears qkv{randn({12, 8}, rng), Tensor(), randn({8, 4}, rng), Tensor()};
  testing::expect_error([&] { ops::attention_layer_step(row, qkv, 1, full, nullptr, {}); }, "no room");
}

}  // namespace
}  // namespace tf

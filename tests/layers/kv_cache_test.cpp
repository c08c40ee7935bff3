// KV-cached GPT inference against the full recompute: for every position encoding, with and
// without grouped-query attention, the cached path's logits for each new position are the full
// forward's rows at that position (bit for bit in float64, to float32 rounding on the fast
// kernels), over a prefill chunk, further chunks and single tokens; the cache's buffers are
// allocated once; misuse is refused.
#include "layers/kv_cache.h"

#include <algorithm>
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "framework/autograd/tape.h"
#include "framework/kernels/onednn.h"
#include "framework/storage_pool.h"
#include "framework/kernels/cpu/attention_step.h"
#include "model_fixtures.h"
#include "support/compare.h"

namespace tf::layers {
namespace {

using namespace testing;
using tf::testing::all_close;

// A GPT of the tiny test size but with room for 12 positions, kv_heads key/value heads (0: all),
// and a sliding window of `window` positions (0: none).
ModelConfig cached_config(PositionEncoding position, int64_t n_heads, int64_t kv_heads, int64_t window = 0) {
  ModelConfig c = tiny_config(Architecture::gpt, position);
  c.max_seq_len = 12;
  c.n_heads = n_heads;
  c.n_kv_heads = kv_heads;
  c.attention.window = window;
  return c;
}

// logits[:, begin:end] of (B, T, V) logits, as a new (B, end - begin, V) tensor of the same dtype.
Tensor positions(const Tensor& logits, int64_t begin, int64_t end) {
  const int64_t B = logits.dim(0), T = logits.dim(1), V = logits.dim(2);
  const std::vector<double> v = logits.to_vector();
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b) out.insert(out.end(), v.begin() + (b * T + begin) * V, v.begin() + (b * T + end) * V);
  return Tensor::from_vector(out, {B, end - begin, V}, logits.dtype());
}

// ids[:, begin:end] of (B, T) ids.
Tensor id_columns(const Tensor& ids, int64_t begin, int64_t end) {
  const int64_t B = ids.dim(0), T = ids.dim(1);
  std::vector<int32_t> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), ids.data<int32_t>() + b * T + begin, ids.data<int32_t>() + b * T + end);
  return Tensor::from_ids(out, {B, end - begin});
}

// Runs ids (B, T) through the cache in chunks of the given lengths (summing to T) and returns each
// chunk's logits next to the same rows of one full forward pass over the whole sequence.
struct ChunkResult {
  Tensor cached, full;  // (B, chunk, V) each
};
std::vector<ChunkResult> run_chunks(const Gpt& model, const Tensor& ids, const std::vector<int64_t>& chunks) {
  const NoGradGuard no_grad;
  const Context eval;
  const Tensor full = model.logits(ids, Tensor(), eval);  // (B, T, V)
  KvCache cache = model.make_cache(ids.dim(0));
  std::vector<ChunkResult> out;
  int64_t begin = 0;
  for (const int64_t n : chunks) {
    out.push_back({model.logits_cached(id_columns(ids, begin, begin + n), cache, eval), positions(full, begin, begin + n)});
    begin += n;
    EXPECT_EQ(cache.length(), begin);
  }
  return out;
}

struct CacheCase {
  PositionEncoding position;
  int64_t heads, kv_heads;
  int64_t window = 0;
  ops::RopeScalingKind rope_scaling = ops::RopeScalingKind::none;
  int64_t global_tokens = 0, random_blocks = 0;  // with the window: Longformer, BigBird (blocks of 3)
  std::vector<MixerKind> mixers = {};  // empty: softmax attention in both layers
  double logit_softcap = 0;
};
void PrintTo(const CacheCase& c, std::ostream* out) {
  *out << position_encoding_name(c.position) << " H=" << c.heads << " G=" << (c.kv_heads ? c.kv_heads : c.heads);
  if (c.window) *out << " window=" << c.window;
  if (c.rope_scaling != ops::RopeScalingKind::none) *out << " " << ops::rope_scaling_name(c.rope_scaling) << " x3";
  if (c.global_tokens || c.random_blocks) *out << " global=" << c.global_tokens << " random=" << c.random_blocks;
  for (MixerKind m : c.mixers) *out << " " << mixer_name(m);
  if (c.logit_softcap > 0) *out << " softcap=" << c.logit_softcap;
}

class CachedGpt : public ::testing::TestWithParam<CacheCase> {
 protected:
  ModelConfig config() const {
    ModelConfig c = cached_config(GetParam().position, GetParam().heads, GetParam().kv_heads, GetParam().window);
    // A scaled table (YaRN's also scales the rows) reaches the fused decoding step through its rows.
    c.rope_scaling = {.kind = GetParam().rope_scaling, .factor = GetParam().rope_scaling == ops::RopeScalingKind::none ? 1.0 : 3.0,
                      .original_context = 4};
    c.attention.global_tokens = GetParam().global_tokens;
    c.attention.random_blocks = GetParam().random_blocks;
    c.attention.sparse_block = 3;
    c.mixers = GetParam().mixers;
    c.attention.logit_softcap = GetParam().logit_softcap;
    return c;
  }
};

// float64 runs the reference kernels, which compute every output row by the same loops in the
// same order whatever the number of rows or cached keys, so nothing may differ at all (a
// differential layer too: both paths form o1 - lambda o2 from the same rows). Except a
// linear-attention layer: its full forward sums each pair (the pairwise reference) while decoding
// adds each position to a running state (the chunked kernel), so the sums differ in order: 1e-12.
TEST_P(CachedGpt, Float64LogitsEqualTheFullForwardExactly) {
  Init init{Rng(3), DType::f64};
  const Gpt model(config(), init);
  perturb(model.parameters(), 4);
  const Tensor ids = random_ids({2, 12}, 11, 5);
  // A prefill chunk, a second chunk (T_q > 1 over a non-empty cache), then single tokens to the end.
  const std::vector<int64_t> chunks = {4, 3, 1, 1, 1, 1, 1};
  const auto results = run_chunks(model, ids, chunks);
  for (size_t i = 0; i < results.size(); ++i) {
    const std::vector<double> cached = results[i].cached.to_vector(), full = results[i].full.to_vector();
    ASSERT_EQ(cached.size(), full.size());
    const auto& mixers = GetParam().mixers;
    const double tolerance = std::count(mixers.begin(), mixers.end(), MixerKind::linear) > 0 ? 1e-12 : 0.0;
    for (size_t e = 0; e < cached.size(); ++e)
      ASSERT_NEAR(cached[e], full[e], tolerance) << "chunk " << i << ", element " << e;
  }
}

// float32 on the fast kernels: oneDNN picks different blockings for 1 row and for 12 rows (and for
// 1..12 keys), so sums are formed in another order. Each logit is a chain of dot products of length
// <= 4C = 32 through 2 blocks; reordering a float32 sum of n terms moves it by about n * 2^-24
// relative to the sum of magnitudes, ~2e-6 here, a few times over through the layers, on logits of
// size ~1 (weights perturbed by 0.3): 2e-5 absolute is a safe bound that a wrong position, a stale
// key or a missing mask (errors of order 0.1) cannot meet.
TEST_P(CachedGpt, Float32LogitsMatchTheFullForwardToRounding) {
  Init init{Rng(3), DType::f32};
  const Gpt model(config(), init);
  Rng rng(4);  // perturb() for float32 parameters
  for (const auto& p : model.parameters()) {
    const Tensor noise = randn(p.tensor.shape(), rng, 0.3, DType::f32);
    for (int64_t i = 0; i < p.tensor.numel(); ++i) p.tensor.data<float>()[i] += noise.data<float>()[i];
  }
  const Tensor ids = random_ids({1, 12}, 11, 6);
  const auto results = run_chunks(model, ids, {5, 1, 1, 2, 1, 1, 1});
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_TRUE(all_close(results[i].cached, results[i].full, 0, 2e-5)) << "chunk " << i;
}

const CacheCase kCacheCases[] = {
    CacheCase{PositionEncoding::none, 2, 0},
    CacheCase{PositionEncoding::sinusoidal, 2, 0},
    CacheCase{PositionEncoding::learned, 2, 0},
    CacheCase{PositionEncoding::rope, 2, 0},
    CacheCase{PositionEncoding::learned, 4, 2},   // grouped-query
    CacheCase{PositionEncoding::rope, 4, 1},      // multi-query
    CacheCase{PositionEncoding::sinusoidal, 4, 2},
    // ALiBi: each query head's slope follows it into its
    // key/value group's decoding call
    CacheCase{PositionEncoding::alibi, 4, 2},
    // a window shorter than the sequence: decoding drops
    // the keys that slide out of it
    CacheCase{PositionEncoding::learned, 2, 0, 3},
    CacheCase{PositionEncoding::alibi, 4, 1, 5},
    // RoPE stretched for a longer context
    CacheCase{PositionEncoding::rope, 4, 2, 0, ops::RopeScalingKind::yarn},
    CacheCase{PositionEncoding::rope, 2, 0, 0, ops::RopeScalingKind::ntk},
    // T5's learned bias, its bucket table built per decoding step
    CacheCase{PositionEncoding::t5, 4, 2},
    CacheCase{PositionEncoding::t5, 2, 0, 3},
    // Longformer and BigBird patterns: the cache keeps every row
    CacheCase{PositionEncoding::rope, 4, 2, 2, ops::RopeScalingKind::none, 2, 0},
    CacheCase{PositionEncoding::alibi, 2, 0, 2, ops::RopeScalingKind::none, 1, 2},
    // linear attention: a (D, D + 1) state per head instead of
    // keys and values; alone, and beside a windowed RoPE layer
    CacheCase{PositionEncoding::learned, 2, 0, 0, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::linear}},
    CacheCase{PositionEncoding::rope, 2, 0, 3, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::linear, MixerKind::attention}},
    // differential attention: two key buffers of G / 2 heads
    // and values of width 2D; grouped-query with RoPE, then
    // beside a softmax layer under ALiBi and a window
    CacheCase{PositionEncoding::rope, 4, 2, 0, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::differential}},
    CacheCase{PositionEncoding::alibi, 4, 0, 3, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::differential, MixerKind::attention}},
    // Mamba: the convolution's last K - 1 inputs and the scan's
    // state; alone, and beside a windowed RoPE layer (Jamba)
    CacheCase{PositionEncoding::none, 2, 0, 0, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::mamba}},
    CacheCase{PositionEncoding::rope, 2, 0, 3, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::mamba, MixerKind::attention}},
    // Gemma 2's soft cap, after T5's bias, and on both maps
    // of a differential layer beside a windowed one
    CacheCase{PositionEncoding::t5, 4, 2, 0, ops::RopeScalingKind::none, 0, 0, {}, 0.8},
    CacheCase{PositionEncoding::alibi, 4, 0, 3, ops::RopeScalingKind::none, 0, 0,
              {MixerKind::differential, MixerKind::attention}, 1.5}};
INSTANTIATE_TEST_SUITE_P(, CachedGpt, ::testing::ValuesIn(kCacheCases));

// Decoding is one of the paths every option of Note [variant options] must go through: a new row
// there without a case above fails here.
TEST(KvCache, EveryAttentionVariantOptionHasADecodingCase) {
  for (const kernels::VariantOption& option : kernels::kVariantOptions) {
    bool covered = false;
    for (const CacheCase& c : kCacheCases) {
      ModelConfig m = cached_config(c.position, c.heads, c.kv_heads, c.window);
      m.attention.global_tokens = c.global_tokens;
      m.attention.random_blocks = c.random_blocks;
      m.attention.logit_softcap = c.logit_softcap;
      covered |= option.used(m.block_options(0).attn.variant);
    }
    EXPECT_TRUE(covered) << option.key << " has no decoding case";
  }
}

// Decoding runs the training layers, so every block variant decodes: post-LN blocks, no biases, an
// untied LM head, erf GELU, grouped- and multi-query attention, a d_ff of 20, RMSNorm, SwiGLU, every
// feed-forward kind and every attention layer option; token by token after a
// 3-token prefill, at 1 to 3 threads (3 > G: a thread with no key/value head in the step's parallel
// region). Against the full forward's rows, to float32 rounding as in
// Float32LogitsMatchTheFullForwardToRounding.
TEST(DecodeStep, EveryBlockVariantMatchesTheFullForwardAtAnyThreadCount) {
  struct Variant {
    const char* name;
    bool pre_norm, bias, tie;
    ops::GeluApprox gelu;
    int64_t heads, kv_heads, d_ff;
    kernels::NormKind norm = kernels::NormKind::layer;
    kernels::FeedForwardKind feed_forward = kernels::FeedForwardKind::gelu;
    std::vector<MixerKind> mixers = {};
    AttentionLayerOptions layer = {};
  };
  std::vector<Variant> variants = {{"pre-LN", true, true, true, ops::GeluApprox::tanh, 2, 0, 0},
                              {"post-LN, erf, untied", false, true, false, ops::GeluApprox::erf, 2, 0, 0},
                              {"no bias, grouped-query", true, false, true, ops::GeluApprox::tanh, 4, 2, 0},
                              {"d_ff 20, multi-query", true, true, true, ops::GeluApprox::tanh, 4, 1, 20},
                              {"RMSNorm", true, true, true, ops::GeluApprox::tanh, 2, 0, 0, kernels::NormKind::rms},
                              {"post-RMSNorm", false, true, true, ops::GeluApprox::tanh, 2, 0, 0, kernels::NormKind::rms},
                              {"SwiGLU, RMSNorm", true, false, true, ops::GeluApprox::tanh, 2, 0, 0, kernels::NormKind::rms,
                               kernels::FeedForwardKind::swiglu}};
  for (const kernels::FeedForwardKindRow& row : kernels::kFeedForwardKindTable)  // every kind of Note [feed-forward kinds]
    variants.push_back({row.name, true, true, true, ops::GeluApprox::tanh, 2, 0, 0, kernels::NormKind::layer, row.kind});
  // Every row of Note [attention layer options], on softmax layers (which then leave the fused step)
  // and on a [differential, linear] pattern.
  for (const AttentionLayerOption& option : kAttentionLayerOptions)
    for (const std::vector<MixerKind>& mixers : {std::vector<MixerKind>{}, {MixerKind::differential, MixerKind::linear}})
      variants.push_back({option.key, true, true, true, ops::GeluApprox::tanh, 4, 0, 0, kernels::NormKind::layer,
                          kernels::FeedForwardKind::gelu, mixers, option.example});
  const int saved_threads = omp_get_max_threads();
  for (const Variant& v : variants) {
    ModelConfig c = cached_config(PositionEncoding::learned, v.heads, v.kv_heads);
    c.pre_norm = v.pre_norm;
    c.bias = v.bias;
    c.tie_embeddings = v.tie;
    c.gelu = v.gelu;
    c.d_ff = v.d_ff;
    c.norm = v.norm;
    c.feed_forward = v.feed_forward;
    c.mixers = v.mixers;
    c.attention_layer = v.layer;
    Init init{Rng(5), DType::f32};
    const Gpt model(c, init);
    Rng rng(6);
    for (const auto& p : model.parameters()) {
      const Tensor noise = randn(p.tensor.shape(), rng, 0.3, DType::f32);
      for (int64_t i = 0; i < p.tensor.numel(); ++i) p.tensor.data<float>()[i] += noise.data<float>()[i];
    }
    const Tensor ids = random_ids({1, 12}, 11, 7);
    for (int threads = 1; threads <= 3; ++threads) {
      omp_set_num_threads(threads);
      const auto results = run_chunks(model, ids, {3, 1, 1, 1, 1, 1, 1, 1, 1, 1});
      for (size_t i = 0; i < results.size(); ++i)
        EXPECT_TRUE(all_close(results[i].cached, results[i].full, 0, 2e-5))
            << v.name << ", " << threads << " threads, chunk " << i;
    }
  }
  omp_set_num_threads(saved_threads);
}

// The decoding-step kernel against the reference kernel run in float64 on the same (float) inputs,
// on odd sizes: query heads per key/value head, query rows (the last T_q of T_k, causal), keys, and
// head sizes that are not multiples of the vector width. Inputs are N(0, 1). Each output is a
// convex combination of values, formed from dot products of D <= 67 terms and a sum of T_k <= 130
// exponentials; float32 rounding in each (about n * 2^-24 relative to the sum of magnitudes, and
// exp_fast's 0.87 ulp) stays below 1e-5 here; wrong masking or scaling errs by far more than 1e-2.
TEST(AttentionStepFast, MatchesTheReferenceKernelOnOddSizes) {
  for (const int64_t heads : {1, 3})
    for (const int64_t q_len : {1, 2, 3})
      for (const int64_t kv_len : {3, 17, 63, 130})
        for (const int64_t D : {1, 3, 17, 67}) {
          kernels::AttentionDims d;
          d.heads = heads;
          d.q_len = q_len;
          d.kv_len = kv_len;
          d.head_dim = d.value_dim = D;
          d.scale = 1.0 / std::sqrt(static_cast<double>(D));
          const kernels::AttentionMask mask{.causal = true};
          const Tensor q = random_normal({heads, q_len, D}, 1).to(DType::f32);
          const Tensor k = random_normal({kv_len, D}, 2).to(DType::f32), v = random_normal({kv_len, D}, 3).to(DType::f32);
          Tensor out = Tensor::empty({heads, q_len, D}, DType::f32), out_lse = Tensor::empty({heads, q_len}, DType::f32);
          kernels::attention_step_fast({.dims = d, .mask = mask, .queries = q.data<float>(), .keys = k.data<float>(),
                                        .values = v.data<float>(), .out = out.data<float>(),
                                        .lse = out_lse.data<float>()});
          const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
          Tensor want = Tensor::empty({heads, q_len, D}, DType::f64), lse = Tensor::empty({heads, q_len}, DType::f64);
          kernels::attention_forward_reference<double>({.dims = d, .mask = mask, .queries = q64.data<double>(),
                                                        .keys = k64.data<double>(), .values = v64.data<double>(),
                                                        .out = want.data<double>(), .lse = lse.data<double>()});
          EXPECT_TRUE(all_close(out.to(DType::f64), want, 1e-5, 1e-5))
              << "heads " << heads << " T_q " << q_len << " T_k " << kv_len << " D " << D;
          EXPECT_TRUE(all_close(out_lse.to(DType::f64), lse, 1e-5, 1e-5)) << "lse, T_k " << kv_len << " D " << D;
        }
}

TEST(KvCache, ClearStartsAgainAndGivesTheSameLogits) {
  Init init{Rng(3), DType::f64};
  const Gpt model(cached_config(PositionEncoding::learned, 2, 0), init);
  perturb(model.parameters(), 4);
  const NoGradGuard no_grad;
  const Context eval;
  const Tensor a = random_ids({1, 6}, 11, 7), b = random_ids({1, 3}, 11, 8);
  KvCache cache = model.make_cache();
  model.logits_cached(a, cache, eval);
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  // The stale rows of `a` past length 3 are never read: `b` alone gives b's full forward.
  EXPECT_TRUE(all_close(model.logits_cached(b, cache, eval), model.logits(b, Tensor(), eval), 0, 0));
}

TEST(KvCache, BuffersAreAllocatedOnceAndNeverMoveAndStepsMakeNoPrimitives) {
  Init init{Rng(3), DType::f32};
  const Gpt model(cached_config(PositionEncoding::rope, 4, 2), init);
  const NoGradGuard no_grad;
  const Context eval;
  // Idle blocks of the same size class, left by earlier tests in this process, would otherwise
  // serve the cache and hide its allocations from the count.
  storage_pool::trim();
  const uint64_t before = storage_allocation_count();
  KvCache cache = model.make_cache();
  EXPECT_EQ(storage_allocation_count() - before, 2u * 2u);  // keys and values of 2 layers
  EXPECT_EQ(cache.keys(0).shape(), Shape({1, 2, 12, 2}));   // (B, G, L, D): D = 8 / 4
  std::vector<const void*> buffers;
  for (int64_t l = 0; l < 2; ++l) buffers.insert(buffers.end(), {cache.keys(l).raw_data(), cache.values(l).raw_data()});
  model.logits_cached(random_ids({1, 4}, 11, 1), cache, eval);
  model.logits_cached(random_ids({1, 1}, 11, 2), cache, eval);
  // A decoding step creates no oneDNN primitive either (the key count grows every step: a kernel
  // keyed by shape would make new ones each time).
  const uint64_t primitives = kernels::onednn_primitives_created();
  for (int i = 0; i < 7; ++i) model.logits_cached(random_ids({1, 1}, 11, 3 + i), cache, eval);
  EXPECT_EQ(kernels::onednn_primitives_created(), primitives);
  EXPECT_EQ(cache.length(), 12);
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_EQ(cache.keys(l).raw_data(), buffers[2 * l]);
    EXPECT_EQ(cache.values(l).raw_data(), buffers[2 * l + 1]);
  }
}

// A sliding window of w keeps 2w rows, not max_seq_len (Mistral's rolling buffer): over a 40-token
// sequence with w = 4 the cache is (B, G, 8, D), drops its old rows every few tokens, and still gives
// the full forward's logits exactly in float64, for a prefill longer than one pass (split in parts),
// single tokens, and RoPE and ALiBi, whose positions must survive the drops.
TEST(KvCache, AWindowKeepsTwiceTheWindowAndMatchesTheFullForward) {
  for (PositionEncoding position :
       {PositionEncoding::rope, PositionEncoding::alibi, PositionEncoding::learned, PositionEncoding::t5}) {
    SCOPED_TRACE(position_encoding_name(position));
    ModelConfig c = cached_config(position, 4, 2, 4);
    c.max_seq_len = 40;
    Init init{Rng(3), DType::f64};
    const Gpt model(c, init);
    perturb(model.parameters(), 4);
    const KvCache fresh = model.make_cache();
    EXPECT_EQ(fresh.capacity(), 8);
    EXPECT_EQ(fresh.keys(0).shape(), Shape({1, 2, 8, 2}));  // (B, G, 2w, D)
    const Tensor ids = random_ids({1, 40}, 11, 9);
    std::vector<int64_t> chunks = {11, 2, 1, 3};  // 11 > 2w - (w - 1) = 5: three passes
    while (std::accumulate(chunks.begin(), chunks.end(), int64_t{0}) < 40) chunks.push_back(1);
    const auto results = run_chunks(model, ids, chunks);
    for (size_t i = 0; i < results.size(); ++i)
      ASSERT_TRUE(all_close(results[i].cached, results[i].full, 0, 0)) << "chunk " << i;
  }
}

TEST(KvCache, RefusesOverflowGradModeAndMismatchedCaches) {
  Init init{Rng(3), DType::f32};
  const Gpt model(cached_config(PositionEncoding::learned, 2, 0), init);
  const Context eval;
  {
    KvCache cache = model.make_cache();
    EXPECT_THROW(model.logits_cached(random_ids({1, 2}, 11, 1), cache, eval), Error);  // grad mode is on
    EXPECT_EQ(cache.length(), 0);
  }
  const NoGradGuard no_grad;
  KvCache cache = model.make_cache();
  model.logits_cached(random_ids({1, 10}, 11, 1), cache, eval);
  EXPECT_THROW(model.logits_cached(random_ids({1, 3}, 11, 2), cache, eval), InputError);  // 13 > 12
  EXPECT_EQ(cache.length(), 10);  // a refused call leaves the cache as it was
  model.logits_cached(random_ids({1, 2}, 11, 3), cache, eval);  // exactly full is fine
  EXPECT_EQ(cache.length(), 12);

  KvCache batch2 = model.make_cache(2);
  EXPECT_THROW(model.logits_cached(random_ids({1, 2}, 11, 1), batch2, eval), Error);  // batch 1 ids
  Init init64{Rng(3), DType::f64};
  const Gpt model64(cached_config(PositionEncoding::learned, 2, 0), init64);
  KvCache cache32 = model.make_cache();
  EXPECT_THROW(model64.logits_cached(random_ids({1, 2}, 11, 1), cache32, eval), Error);  // f32 cache, f64 model
}

}  // namespace
}  // namespace tf::layers

// The tiled (flash) attention kernels against the reference kernels in float64 and float32 on odd
// sizes, masks, grouped heads, T_q != T_k, D_v != D and dropout; rows that see no key; and
// bit-identical results run to run and across thread counts.
#include "framework/kernels/cpu/flash_attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "framework/random.h"

namespace tf::kernels {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Padding { none, mixed };

struct Case {
  std::string name;
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim;
  bool causal;
  Padding padding;
  double dropout = 0;
  AttentionVariant variant = {};
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

// One problem's inputs, float32 (the kernels' inputs) and the same numbers in float64.
struct Problem {
  AttentionDims d;
  std::vector<uint8_t> keep;  // (B, T_k) or empty
  std::vector<float> q, k, v, dout;
  AttentionMask mask() const { return AttentionMask::of(variant, causal, keep.empty() ? nullptr : keep.data()); }
  AttentionScores scores() const { return AttentionScores::of(variant); }
  bool causal = false;
  AttentionVariant variant;
};

std::vector<float> normal(int64_t n, Rng& rng) {
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(rng.normal());
  return x;
}

// Mixed padding gives every kind of row: entry 0 pads its last third of keys, entry 1 its first
// two keys (left padding: under a causal mask with T_q = T_k its first two queries see nothing),
// entry 2 every key (a fully padded sequence: no row sees anything), further entries nothing.
Problem make_problem(const Case& c, uint64_t seed) {
  Problem p;
  p.d = {c.batch, c.heads, c.kv_heads, c.q_len, c.kv_len, c.head_dim, c.value_dim};
  p.d.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  p.d.dropout = c.dropout;
  p.d.dropout_seed = 77;
  p.causal = c.causal;
  p.variant = c.variant;
  if (c.padding == Padding::mixed) {
    p.keep.assign(c.batch * c.kv_len, 1);
    for (int64_t j = c.kv_len - c.kv_len / 3; j < c.kv_len; ++j) p.keep[j] = 0;
    if (c.batch > 1)
      for (int64_t j = 0; j < std::min<int64_t>(2, c.kv_len); ++j) p.keep[c.kv_len + j] = 0;
    if (c.batch > 2) std::fill(p.keep.begin() + 2 * c.kv_len, p.keep.begin() + 3 * c.kv_len, 0);
  }
  Rng rng(seed);
  p.q = normal(c.batch * c.heads * c.q_len * c.head_dim, rng);
  p.k = normal(c.batch * c.kv_heads * c.kv_len * c.head_dim, rng);
  p.v = normal(c.batch * c.kv_heads * c.kv_len * c.value_dim, rng);
  p.dout = normal(c.batch * c.heads * c.q_len * c.value_dim, rng);
  return p;
}

// Forward and backward results of one kernel, in its element type.
template <class T>
struct Result {
  std::vector<T> out, lse, probs, dq, dk, dv;
};

template <class T>
std::vector<T> as(const std::vector<float>& x) {
  return std::vector<T>(x.begin(), x.end());
}

template <class T>
Result<T> run_reference(const Problem& p) {
  const AttentionDims& d = p.d;
  Result<T> r;
  r.out.resize(p.dout.size()), r.lse.resize(d.batch * d.heads * d.q_len), r.probs.resize(r.lse.size() * d.kv_len);
  r.dq.resize(p.q.size()), r.dk.resize(p.k.size()), r.dv.resize(p.v.size());
  const std::vector<T> q = as<T>(p.q), k = as<T>(p.k), v = as<T>(p.v), dout = as<T>(p.dout);
  attention_forward_reference<T>({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = q.data(), .keys = k.data(),
                                  .values = v.data(), .out = r.out.data(), .lse = r.lse.data(),
                                  .probs = r.probs.data()});
  attention_backward_reference<T>({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = q.data(), .keys = k.data(),
                                   .values = v.data(), .out = r.out.data(), .lse = r.lse.data(), .dout = dout.data(),
                                   .dqueries = r.dq.data(), .dkeys = r.dk.data(), .dvalues = r.dv.data()});
  return r;
}

// The backward runs on the flash forward's own out and lse, as in training. NaN-filled outputs
// show any element a kernel forgets to write.
Result<float> run_flash(const Problem& p, bool with_probs = true) {
  const AttentionDims& d = p.d;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Result<float> r;
  r.out.assign(p.dout.size(), nan), r.lse.assign(d.batch * d.heads * d.q_len, nan);
  if (with_probs) r.probs.assign(r.lse.size() * d.kv_len, nan);
  r.dq.assign(p.q.size(), nan), r.dk.assign(p.k.size(), nan), r.dv.assign(p.v.size(), nan);
  flash_attention_forward({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = p.q.data(), .keys = p.k.data(),
                           .values = p.v.data(), .out = r.out.data(), .lse = r.lse.data(),
                           .probs = with_probs ? r.probs.data() : nullptr});
  flash_attention_backward({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = p.q.data(), .keys = p.k.data(),
                            .values = p.v.data(), .out = r.out.data(), .lse = r.lse.data(), .dout = p.dout.data(),
                            .dqueries = r.dq.data(), .dkeys = r.dk.data(), .dvalues = r.dv.data()});
  return r;
}

// Passes when max |got - want| <= rel * max(max |want|, 1) (finite entries; -inf must match exactly).
// The floor 1 is the size of the N(0, 1) inputs: a tensor that is exactly 0 in exact arithmetic
// (dQ and dK when T_k = 1, since P = 1 there) is held to rounding noise of that size.
template <class T>
::testing::AssertionResult close_to_max(const char* name, const std::vector<float>& got, const std::vector<T>& want,
                                        double rel) {
  double scale = 0, worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::isfinite(static_cast<double>(want[i]))) scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = static_cast<double>(want[i]);
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) return ::testing::AssertionFailure() << name << "[" << i << "] = " << g << ", want " << w;
      continue;
    }
    const double err = std::abs(g - w);
    if (!(err <= worst)) worst = err, worst_i = i;  // NaN lands here too
  }
  scale = std::max(scale, 1.0);
  if (worst <= rel * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": worst error " << worst << " at " << worst_i << " (" << got[worst_i]
                                       << " vs " << want[worst_i] << "), allowed " << rel << " x max " << scale;
}

// Tolerances, relative to each tensor's largest entry, from float32 rounding (u = 2^-24 = 6e-8).
// A score is a D-term dot product (D <= 33) of N(0, 1) values scaled by 1/sqrt(D): rounding error
// ~ sqrt(D) u |q| |k| / sqrt(D) ~ 1e-6 at worst on scores of size up to ~5, plus exp_fast's 0.9 ulp.
// A probability inherits that as relative error, an output element (a convex combination of N(0, 1)
// values, max ~ 3) as ~1e-6 absolute, i.e. ~3e-7 of its max; lse (max ~ 5-10) the same absolute
// 1e-6. Gradients sum up to G T_q = 390 (dK, dV) or T_k = 130 (dQ) such terms, and the tiled and
// reference kernels add them in different orders, so errors grow like sqrt(n) ~ 20 times the
// per-term error, ~2e-5 of the max at worst. The largest errors observed over all cases below were
// 8e-7 (out), 4e-7 (probs), 2e-7 (lse) and 1.4e-6 (gradients) of the max; we allow 1e-5 and 2e-5,
// a 12-15x margin, while a wrong block boundary or a missed rescale (errors of order the max) fails.
constexpr double kForwardTol = 1e-5, kGradientTol = 2e-5;

class FlashAgainstReference : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAgainstReference, ForwardAndBackwardAgreeInDoubleAndFloat) {
  const Case& c = GetParam();
  const Problem p = make_problem(c, 1000 + c.q_len * 7 + c.head_dim);
  const Result<float> flash = run_flash(p);
  const Result<double> ref = run_reference<double>(p);
  const Result<float> ref32 = run_reference<float>(p);
  for (const auto& [name, got, want, want32, tol] :
       {std::tuple{"out", &flash.out, &ref.out, &ref32.out, kForwardTol},
        std::tuple{"lse", &flash.lse, &ref.lse, &ref32.lse, kForwardTol},
        std::tuple{"probs", &flash.probs, &ref.probs, &ref32.probs, kForwardTol},
        std::tuple{"dq", &flash.dq, &ref.dq, &ref32.dq, kGradientTol},
        std::tuple{"dk", &flash.dk, &ref.dk, &ref32.dk, kGradientTol},
        std::tuple{"dv", &flash.dv, &ref.dv, &ref32.dv, kGradientTol}}) {
    EXPECT_TRUE(close_to_max(name, *got, *want, tol)) << "against float64";
    EXPECT_TRUE(close_to_max(name, *got, *want32, tol)) << "against the float32 reference";
  }
}

std::vector<Case> odd_cases() {
  std::vector<Case> cases;
  for (int64_t T : {1, 3, 17, 63, 130})
    for (int64_t D : {1, 8, 33})
      for (bool causal : {false, true})
        for (Padding pad : {Padding::none, Padding::mixed}) {
          std::string name = "T";
          name += std::to_string(T) + "_D" + std::to_string(D) + (causal ? "_causal" : "") +
                  (pad == Padding::mixed ? "_padded" : "");
          cases.push_back({name, 3, 6, 2, T, T, D, D, causal, pad});
        }
  // Grouped-query extremes, one kv head for all six query heads and none shared; T_q != T_k (the
  // queries are the last T_q positions; with T_q > T_k under causality the first rows see nothing);
  // D_v != D; dropout through the same counter-based mask.
  const std::vector<Case> more = {
      {"gqa_Hkv1_causal_padded", 3, 6, 1, 130, 130, 8, 8, true, Padding::mixed},
      {"mha_Hkv6_causal", 3, 6, 6, 130, 130, 8, 8, true, Padding::none},
      {"single_pair_causal", 1, 6, 1, 130, 130, 33, 33, true, Padding::none},
      {"Tq17_Tk130_causal", 2, 6, 2, 17, 130, 8, 8, true, Padding::none},
      {"Tq17_Tk130_causal_padded", 3, 6, 2, 17, 130, 8, 8, true, Padding::mixed},
      {"Tq130_Tk17_causal", 2, 6, 2, 130, 17, 8, 8, true, Padding::none},
      {"Tq130_Tk63_causal_padded", 3, 6, 3, 130, 63, 33, 33, true, Padding::mixed},
      {"Tq63_Tk3_noncausal", 2, 6, 2, 63, 3, 8, 8, false, Padding::none},
      {"Dv33_D8_causal", 2, 6, 2, 63, 63, 8, 33, true, Padding::mixed},
      {"Dv5_D33", 2, 6, 2, 130, 130, 33, 5, false, Padding::none},
      {"dropout_causal_padded", 3, 6, 2, 130, 130, 8, 8, true, Padding::mixed, 0.3},
      {"dropout_Tq17_Tk130", 2, 6, 3, 17, 130, 33, 5, true, Padding::none, 0.5},
      // Variants (Note [attention variants]): windows narrower and wider than a block (so whole key
      // blocks are skipped on both sides of the band), both ways; ALiBi on 6 heads (not a power of two).
      {"window5_causal_padded", 3, 6, 2, 130, 130, 8, 8, true, Padding::mixed, 0, {.window = 5}},
      {"window70_causal", 2, 6, 2, 130, 130, 8, 8, true, Padding::none, 0, {.window = 70}},
      {"window9_bidirectional", 2, 6, 3, 130, 130, 33, 33, false, Padding::none, 0, {.window = 9}},
      {"window7_Tq17_Tk130", 2, 6, 2, 17, 130, 8, 8, true, Padding::none, 0, {.window = 7}},
      {"alibi_causal_padded", 3, 6, 2, 130, 130, 8, 8, true, Padding::mixed, 0, {.alibi = true}},
      {"alibi_bidirectional_dropout", 2, 6, 6, 63, 63, 8, 8, false, Padding::none, 0.3, {.alibi = true}},
      {"alibi_window33_Tq17_Tk130", 2, 6, 1, 17, 130, 33, 33, true, Padding::mixed, 0, {.window = 33, .alibi = true}},
      // Gemma 2's soft-capping: a modifier whose derivative is not 1, alone and after ALiBi; the cap 0.5
      // sits well inside the scores' range, so most scores are bent.
      {"softcap_causal_padded", 3, 6, 2, 130, 130, 8, 8, true, Padding::mixed, 0, {.logit_softcap = 0.5}},
      {"softcap_alibi_bidirectional_dropout", 2, 6, 3, 63, 63, 33, 33, false, Padding::none, 0.3,
       {.alibi = true, .logit_softcap = 2.0}},
      {"softcap_window7_Tq17_Tk130", 2, 6, 2, 17, 130, 8, 8, true, Padding::none, 0, {.window = 7, .logit_softcap = 1.0}},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

INSTANTIATE_TEST_SUITE_P(OddSizes, FlashAgainstReference, ::testing::ValuesIn(odd_cases()),
                         [](const auto& info) { return info.param.name; });

// Note [attention masks]: a row with no visible key has output 0, lse -inf and passes no gradient;
// padded keys receive none. Checked exactly, not to a tolerance.
TEST(FlashAttention, RowsThatSeeNoKeyGiveZerosAndInfinityExactly) {
  const Case c{"empty_rows", 3, 4, 2, 70, 70, 8, 8, true, Padding::mixed};
  const Problem p = make_problem(c, 5);
  const Result<float> r = run_flash(p);
  const AttentionDims& d = p.d;
  int64_t empty_rows = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.q_len; ++i) {
        bool visible = false;
        for (int64_t j = 0; j <= i; ++j) visible = visible || p.keep[b * d.kv_len + j];
        const int64_t row = (b * d.heads + h) * d.q_len + i;
        if (visible) {
          EXPECT_TRUE(std::isfinite(r.lse[row])) << row;
          continue;
        }
        ++empty_rows;
        EXPECT_EQ(r.lse[row], -kInf) << row;
        for (int64_t c = 0; c < d.head_dim; ++c) {
          EXPECT_EQ(r.out[row * d.value_dim + c], 0.0f) << row;
          EXPECT_EQ(r.dq[row * d.head_dim + c], 0.0f) << row;
        }
      }
  EXPECT_EQ(empty_rows, d.heads * (2 + d.q_len));  // entry 1: two rows per head; entry 2: all
  for (int64_t e = 0; e < static_cast<int64_t>(r.dk.size()); ++e) {
    const int64_t j = (e / d.head_dim) % d.kv_len, b = e / (d.kv_heads * d.kv_len * d.head_dim);
    if (!p.keep[b * d.kv_len + j]) {
      EXPECT_EQ(r.dk[e], 0.0f) << e;
      EXPECT_EQ(r.dv[e], 0.0f) << e;
    }
  }
  for (const auto* x : {&r.out, &r.probs, &r.dq, &r.dk, &r.dv})
    for (float e : *x) ASSERT_TRUE(std::isfinite(e));
}

bool identical(const Result<float>& a, const Result<float>& b) {
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](float s, float t) {
             return std::bit_cast<uint32_t>(s) == std::bit_cast<uint32_t>(t);
           });
  };
  return same(a.out, b.out) && same(a.lse, b.lse) && same(a.dq, b.dq) && same(a.dk, b.dk) && same(a.dv, b.dv);
}

// Training resumes bit-for-bit only if a step's arithmetic never depends on scheduling: no task
// result depends on which thread ran it (Note [flash determinism]). Two shapes: many (batch,
// kv head) pairs (dQ added directly) and a single pair (dQ split into chunk partial sums).
TEST(FlashAttention, BitIdenticalRunToRunAndAcrossThreadCounts) {
  for (const Case& c : {Case{"many_pairs", 4, 4, 2, 200, 200, 32, 32, true, Padding::mixed, 0.1},
                        Case{"one_pair", 1, 4, 1, 300, 300, 32, 32, true, Padding::none}}) {
    const Problem p = make_problem(c, 9);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    const Result<float> a = run_flash(p, false), b = run_flash(p, false);
    omp_set_num_threads(1);
    const Result<float> one = run_flash(p, false);
    omp_set_num_threads(threads);
    EXPECT_TRUE(identical(a, b)) << c.name << ": two runs differ";
    EXPECT_TRUE(identical(a, one)) << c.name << ": 2 threads and 1 thread differ";
  }
}

// The layout of ops::attention_qkv (FlashLayout): Q, K, V as column ranges of one fused
// (B, T, H D + H_kv D + H_kv D_v) buffer, O and dO as (B, T, H D_v). `to_fused` copies a
// contiguous (B, heads, T, width) tensor into its columns [offset, offset + heads width) of rows
// `stride` floats long; `from_fused` copies them back.
struct Fused {
  int64_t batch, len, stride;
  void to_fused(const std::vector<float>& x, int64_t heads, int64_t width, int64_t offset, std::vector<float>& f) const {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < len; ++t)
          std::copy_n(x.data() + ((b * heads + h) * len + t) * width, width,
                      f.data() + (b * len + t) * stride + offset + h * width);
  }
  std::vector<float> from_fused(const std::vector<float>& f, int64_t heads, int64_t width, int64_t offset) const {
    std::vector<float> x(batch * heads * len * width);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < len; ++t)
          std::copy_n(f.data() + (b * len + t) * stride + offset + h * width, width,
                      x.data() + ((b * heads + h) * len + t) * width);
    return x;
  }
  RowStrides strides(int64_t width) const { return {.batch = len * stride, .head = width, .row = stride}; }
};

// Flash in the fused layout, results copied back to the contiguous layout. NaN-filled outputs show
// any element the kernels forget to write.
Result<float> run_flash_fused(const Problem& p) {
  const AttentionDims& d = p.d;
  const int64_t width = (d.heads + d.kv_heads) * d.head_dim + d.kv_heads * d.value_dim;
  const int64_t k_at = d.heads * d.head_dim, v_at = k_at + d.kv_heads * d.head_dim;
  const Fused in{d.batch, d.q_len, width}, outs{d.batch, d.q_len, d.heads * d.value_dim};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> qkv(d.batch * d.q_len * width, nan), dqkv(qkv.size(), nan), dout(p.dout.size(), nan),
      out(p.dout.size(), nan);
  in.to_fused(p.q, d.heads, d.head_dim, 0, qkv);
  in.to_fused(p.k, d.kv_heads, d.head_dim, k_at, qkv);
  in.to_fused(p.v, d.kv_heads, d.value_dim, v_at, qkv);
  outs.to_fused(p.dout, d.heads, d.value_dim, 0, dout);
  const FlashLayout layout{in.strides(d.head_dim), in.strides(d.head_dim), in.strides(d.value_dim),
                           outs.strides(d.value_dim)};
  Result<float> r;
  r.lse.assign(d.batch * d.heads * d.q_len, nan), r.probs.assign(r.lse.size() * d.kv_len, nan);
  flash_attention_forward({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = qkv.data(),
                           .keys = qkv.data() + k_at, .values = qkv.data() + v_at, .out = out.data(),
                           .lse = r.lse.data(), .probs = r.probs.data()},
                          layout);
  flash_attention_backward({.dims = d, .mask = p.mask(), .scores = p.scores(), .queries = qkv.data(),
                            .keys = qkv.data() + k_at, .values = qkv.data() + v_at, .out = out.data(),
                            .lse = r.lse.data(), .dout = dout.data(), .dqueries = dqkv.data(),
                            .dkeys = dqkv.data() + k_at, .dvalues = dqkv.data() + v_at},
                           layout);
  r.out = outs.from_fused(out, d.heads, d.value_dim, 0);
  r.dq = in.from_fused(dqkv, d.heads, d.head_dim, 0);
  r.dk = in.from_fused(dqkv, d.kv_heads, d.head_dim, k_at);
  r.dv = in.from_fused(dqkv, d.kv_heads, d.value_dim, v_at);
  return r;
}

// The fused layout changes where rows are read and written, never the arithmetic or its order: the
// results are the contiguous kernel's bit for bit (which the cases above hold to the reference),
// on the self-attention cases (T_q = T_k), with padding, grouped heads, D_v != D, dropout, windows
// and ALiBi; with one (batch, kv head) pair, dQ goes through the chunk partial sums.
TEST(FlashAttention, FusedLayoutGivesTheContiguousResultsBitForBit) {
  std::vector<Case> cases;
  for (const Case& c : odd_cases())
    if (c.q_len == c.kv_len) cases.push_back(c);
  cases.push_back({"one_pair_D16", 1, 4, 1, 200, 200, 16, 16, true, Padding::none});
  ASSERT_GE(cases.size(), 60u);
  for (const Case& c : cases) {
    const Problem p = make_problem(c, 31 + c.q_len);
    const Result<float> fused = run_flash_fused(p), contiguous = run_flash(p);
    EXPECT_TRUE(identical(fused, contiguous)) << c.name;
    EXPECT_TRUE(std::equal(fused.probs.begin(), fused.probs.end(), contiguous.probs.begin(), contiguous.probs.end(),
                           [](float s, float t) { return std::bit_cast<uint32_t>(s) == std::bit_cast<uint32_t>(t); }))
        << c.name << ": probs";
  }
}

TEST(FlashAttention, ScratchDoesNotGrowWithTheSquareOfTheSequence) {
  AttentionDims d{1, 4, 4, 1024, 1024, 32, 32};
  const int64_t forward = flash_attention_scratch_bytes(d, 2, false), backward = flash_attention_scratch_bytes(d, 2, true);
  d.q_len = d.kv_len = 8192;
  EXPECT_EQ(flash_attention_scratch_bytes(d, 2, false), forward);  // block buffers only
  // backward adds delta and dQ partial sums: linear in T_q
  EXPECT_LE(flash_attention_scratch_bytes(d, 2, true), 8 * backward);
  EXPECT_LT(flash_attention_scratch_bytes(d, 2, true), d.batch * d.heads * d.q_len * d.kv_len * 4 / 16);
}

}  // namespace
}  // namespace tf::kernels

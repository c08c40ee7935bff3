// What an attention kernel sees besides Q, K and V: the shapes (AttentionDims), the model's choices
// (AttentionVariant), which keys each query sees (AttentionMask) and how its scores are modified
// (AttentionScores). Every kernel (reference float and double, materialised, flash forward and
// backward, decoding step, ring) asks AttentionMask and AttentionScores and nothing else, so a new
// variant is a field of AttentionVariant and a few lines in one of them (Note [attention variants]).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tf::kernels {

struct AttentionDims {
  int64_t batch = 1;       // B, e.g. 16
  int64_t heads = 1;       // H, e.g. 8
  int64_t kv_heads = 1;    // H_kv, divides H, e.g. 2 (grouped-query) or 8 (multi-head)
  int64_t q_len = 1;       // T_q, e.g. 256
  int64_t kv_len = 1;      // T_k, e.g. 256 (T_q < T_k when queries continue a cached prefix)
  int64_t head_dim = 1;    // D, e.g. 64
  int64_t value_dim = 1;   // D_v, e.g. 64
  // Where the queries sit: query i is at position i + T_k - T_q + query_offset, key j at j (the
  // queries are the last T_q of the T_k positions when 0; ring attention pairs a query chunk with a
  // key chunk query_offset positions before it).
  int64_t query_offset = 0;
  double scale = 1.0;      // e.g. 1 / sqrt(64)
  double dropout = 0.0;    // probability of dropping an entry of P, in [0, 1)
  uint64_t dropout_seed = 0;

  int64_t group() const { return heads / kv_heads; }  // query heads per key/value head
};

// Note [attention variants]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// What a model chooses about its attention beyond the shapes and the causal and padding masks, as
// one value that travels unchanged from the recipe (model.attention_window, model.position: alibi,
// model.logit_softcap) through the layer and the op to every kernel. It has the two parts of
// FlexAttention's interface (Dong et al. 2024): position predicates of the mask (mask_mod), which
// AttentionMask reads, and score modifiers (score_mod) with their derivatives, which AttentionScores
// applies. A kernel calls AttentionMask's key_begin / key_end / key_allowed / block_allowed and
// AttentionScores' modify / backward and nothing else, so a new variant is a field here and lines
// in one of the two; no backward kernel changes.
//
// Masks (AttentionMask):
//  - window w > 0 (sliding window, Beltagy et al. 2020; Child et al. 2019): a query at position p
//    sees the keys at positions j with p - w < j (and j < p + w when not causal). The visible run
//    stays contiguous, so the flash kernel skips key blocks outside it: O(T w) work, not O(T^2).
//  - global_tokens g > 0 (Longformer, Beltagy et al. 2020, section 3.1): with a window, positions
//    0 .. g - 1 are global: they see every key, and every query sees them (causality still holds).
//  - random_blocks r > 0 (BigBird, Zaheer et al. 2020, section 2): with a window, positions are cut
//    into blocks of sparse_block, and each query block also sees r key blocks drawn at random
//    (seeded by random_seed and the query block; causal: among the blocks up to its own), the third
//    part of BigBird's window + global + random pattern.
//    Both make the visible keys of a row non-contiguous: key_begin / key_end then give the hull of
//    the row's keys, key_allowed the exact set inside it, and block_allowed lets a tiled kernel skip
//    key blocks the pattern leaves empty.
// Score modifiers (AttentionScores), applied in this order to s = scale q.k:
//  - alibi (Press et al. 2022, "Train Short, Test Long"): no position embedding; the score of query
//    position p and key j gets -m_h |p - j| added, m_h = alibi_slope(h, H). Keys before the query
//    are the only ones under a causal mask; the bidirectional form uses the distance both ways.
//    Additive and not learned: its derivative is 1.
//  - relative_buckets > 0 (T5's relative position bias, Raffel et al. 2020, section 2.1): the score
//    of query position p and key j gets a learned scalar b[h, bucket(p - j)] added. Buckets are
//    exact for small distances and logarithmic up to relative_max_distance (t5_bucket); a causal
//    model buckets only p - j >= 0, a bidirectional one gives keys after the query their own half.
//    The table is a parameter: AttentionScores carries it, and backward sums dS into it by bucket.
//  - logit_softcap c > 0 (Gemma 2, Gemma Team 2024, section 2): s' = c tanh(s / c), which bounds
//    every score to (-c, c); its derivative is 1 - tanh^2(s / c) = 1 - (s' / c)^2.
struct AttentionVariant {
  int64_t window = 0;  // 0 = every position (subject to causality); else the sliding window's width
  bool alibi = false;  // add ALiBi's linear distance bias to the scores
  int64_t relative_buckets = 0;          // T5 bias: buckets (both directions together); 0 = off
  int64_t relative_max_distance = 128;   // T5 bias: distances beyond share the last bucket
  int64_t global_tokens = 0;             // Longformer: the first g positions are global (with a window)
  int64_t random_blocks = 0;             // BigBird: random key blocks per query block (with a window)
  int64_t sparse_block = 16;             // BigBird: the block size of the random pattern
  uint64_t random_seed = 0;              // BigBird: the random blocks' seed
  double logit_softcap = 0;              // Gemma 2: scores -> c tanh(scores / c); 0 = off

  bool operator==(const AttentionVariant&) const = default;
};

// Note [variant options]
// ~~~~~~~~~~~~~~~~~~~~~~
// Each choice of AttentionVariant, declared once: the recipe key that sets it, whether a variant
// uses it, whether ring attention (train.sequence_parallel) honours it, and a small example. What
// must refuse a choice reads this table: the configuration check (a model whose every layer forms
// no scores), sequence parallelism, the GGUF and Hugging Face exports (neither llama.cpp's llama and
// gpt2 nor the Hugging Face classes express any of them). The gradient check runs every example
// (framework/ops/attention_cases.cpp), and the ring and decoding tests fail for a row they do not
// cover. A new variant adds a row.
struct VariantOption {
  const char* key;  // the recipe key (and value) that sets it, e.g. "model.attention_window"
  bool (*used)(const AttentionVariant&);
  bool ring;  // ring attention honours it (it places each chunk pair by AttentionDims::query_offset)
  AttentionVariant example;  // for sequences of 5 or 6 positions
};
inline constexpr VariantOption kVariantOptions[] = {
    {"model.attention_window", [](const AttentionVariant& v) { return v.window > 0; }, true, {.window = 2}},
    {"model.attention_global_tokens", [](const AttentionVariant& v) { return v.global_tokens > 0; }, false,
     {.window = 2, .global_tokens = 1}},
    {"model.attention_random_blocks", [](const AttentionVariant& v) { return v.random_blocks > 0; }, false,
     {.window = 2, .random_blocks = 1, .sparse_block = 2, .random_seed = 3}},
    {"model.position: alibi", [](const AttentionVariant& v) { return v.alibi; }, true, {.alibi = true}},
    {"model.position: t5", [](const AttentionVariant& v) { return v.relative_buckets > 0; }, false,
     {.relative_buckets = 4, .relative_max_distance = 4}},
    {"model.logit_softcap", [](const AttentionVariant& v) { return v.logit_softcap > 0; }, true, {.logit_softcap = 0.5}},
};
// The recipe keys of the options `v` uses (all of them, or those ring attention does not honour).
std::vector<std::string> variant_keys_used(const AttentionVariant& v, bool only_unsupported_by_ring = false);

// T5's bucket of the distance n = query position - key position (the relative_position_bucket of the
// paper's code, written from its definition): bidirectional, half the buckets serve n < 0 (keys
// after the query), the other half n >= 0; causal, every bucket serves n >= 0 (n < 0 counts as 0).
// Within a half of nb buckets, n < nb / 2 has bucket n; larger n is spaced logarithmically,
// nb / 2 + floor(ln(n / (nb / 2)) / ln(max_distance / (nb / 2)) * (nb - nb / 2)), at most nb - 1.
int64_t t5_bucket(int64_t n, bool bidirectional, int64_t buckets, int64_t max_distance);

// ALiBi's slope of head h out of H (Press et al. 2022, section 3): for H a power of two, the
// geometric sequence 2^(-8 / H), 2^(-16 / H), ..., 2^(-8); otherwise the n = 2^floor(log2 H) slopes
// of n heads, followed by every other slope of 2n heads (2^(-4 / n), 2^(-12 / n), ...) for the
// remaining H - n heads, as the paper's code does.
double alibi_slope(int64_t h, int64_t heads);

// The position of query i against keys 0 .. T_k - 1 (AttentionDims::query_offset).
inline int64_t query_position(const AttentionDims& d, int64_t i) { return i + d.kv_len - d.q_len + d.query_offset; }

// Note [attention masks]
// ~~~~~~~~~~~~~~~~~~~~~~
// A mask says which keys j a query i of batch entry b may see. Masks combine by AND: a key is
// visible when every predicate allows it. We split the predicates in two kinds, because a fast
// kernel treats them differently:
//
//  - Position predicates depend only on (i, j) and always leave a contiguous run of keys,
//    [key_begin(i), key_end(i)). Causal masking is one: query i sits at absolute position
//    i + (T_k - T_q) (the queries are the last T_q of the T_k positions, as when decoding after
//    a cached prefix), so it sees keys j <= i + T_k - T_q, i.e. key_end(i) = i + T_k - T_q + 1.
//    A tiled kernel skips whole key blocks outside the run. A sliding window (Note [attention
//    variants]) is one more such predicate.
//  - Per-key predicates depend on (b, j): key padding, key_keep[b T_k + j] == 0 for a pad.
//    Block-sparse patterns would be a third kind, a per-(i-block, j-block) table.
//
// A row may end up with no visible key (left padding under a causal mask, or T_q > T_k with
// causal). Its softmax is undefined; we define its probabilities, its output and every gradient
// through it as 0, and its log-sum-exp as -inf, so no NaN appears anywhere.
struct AttentionMask {
  bool causal = false;
  const uint8_t* key_keep = nullptr;  // (B, T_k), 1 = real token, 0 = padding; null = no padding
  // The variant's mask predicates (Note [attention variants]).
  int64_t window = 0, global_tokens = 0, random_blocks = 0, sparse_block = 16;
  uint64_t random_seed = 0;

  static AttentionMask of(const AttentionVariant& v, bool causal, const uint8_t* key_keep = nullptr) {
    return {.causal = causal, .key_keep = key_keep, .window = v.window, .global_tokens = v.global_tokens,
            .random_blocks = v.random_blocks, .sparse_block = v.sparse_block, .random_seed = v.random_seed};
  }

  // The run [key_begin, key_end) a row's visible keys lie in: exactly those keys for the causal
  // mask and the window, their hull when the pattern is sparse (key_allowed then decides).
  int64_t key_begin(const AttentionDims& d, int64_t i) const { return sparse() ? 0 : window_begin(d, i); }
  int64_t key_end(const AttentionDims& d, int64_t i) const {
    if (!sparse()) return window_end(d, i);
    const int64_t end = causal ? query_position(d, i) + 1 : d.kv_len;
    return end < 0 ? 0 : (end > d.kv_len ? d.kv_len : end);
  }
  int64_t window_begin(const AttentionDims& d, int64_t i) const {
    if (window <= 0) return 0;
    const int64_t begin = query_position(d, i) - window + 1;
    return begin < 0 ? 0 : (begin > d.kv_len ? d.kv_len : begin);
  }
  int64_t window_end(const AttentionDims& d, int64_t i) const {
    int64_t end = d.kv_len;
    if (causal) end = query_position(d, i) + 1;
    else if (window > 0) end = query_position(d, i) + window;
    return end < 0 ? 0 : (end > d.kv_len ? d.kv_len : end);
  }
  // Longformer's global tokens and BigBird's random blocks (Note [attention variants]).
  bool sparse() const { return global_tokens > 0 || random_blocks > 0; }
  // Whether query i sees key j, for j inside [key_begin(i), key_end(i)).
  bool key_allowed(const AttentionDims& d, int64_t i, int64_t j) const { return !sparse() || sparse_allowed(d, i, j); }
  bool sparse_allowed(const AttentionDims& d, int64_t i, int64_t j) const;
  // Whether any query of [i0, i1) may see any key of [j0, j1) (true may be a superset; false is exact).
  bool block_allowed(const AttentionDims& d, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const;
  // Sets s[jj] = -inf for the keys j0 + jj of [j0, j0 + n) that query i does not see.
  template <class T>
  void mask_sparse(const AttentionDims& d, int64_t i, int64_t j0, int64_t n, T* s) const {
    if (!sparse()) return;
    for (int64_t jj = 0; jj < n; ++jj)
      if (!sparse_allowed(d, i, j0 + jj)) s[jj] = -std::numeric_limits<T>::infinity();
  }
  bool key_visible(int64_t b, const AttentionDims& d, int64_t j) const {
    return key_keep == nullptr || key_keep[b * d.kv_len + j] != 0;
  }
};

// The score modifiers of Note [attention variants] for one call: modify() in forward, backward()
// in backward, both on a run of one query row's visible keys. A kernel never asks which modifiers
// are on.
struct AttentionScores {
  // The variant's score modifiers (Note [attention variants]).
  bool alibi = false;
  int64_t relative_buckets = 0;
  double logit_softcap = 0;
  // The model's head count and this call's first head in it: modifiers depend on the head, and
  // decoding calls a kernel per key/value group, whose heads are a slice of the model's.
  // model_heads 0 = dims.heads (the call sees every head).
  int64_t first_head = 0, model_heads = 0;
  // T5 bias (relative_buckets > 0): the (model heads, buckets) table of the kernel's element type,
  // and bucket_of[n + T_k - 1], the bucket of distance n = query position - key position for n in
  // [-(T_k - 1), T_k - 1] (relative_bucket_table builds it once per call).
  const void* relative_bias = nullptr;
  const int32_t* bucket_of = nullptr;

  static AttentionScores of(const AttentionVariant& v) {
    return {.alibi = v.alibi, .relative_buckets = v.relative_buckets, .logit_softcap = v.logit_softcap};
  }

  // Modifies s[0 .. n), the scaled scores of query row i of head h (of this call) against keys
  // j0 .. j0 + n - 1. Callers pass only visible keys.
  template <class T>
  void modify(const AttentionDims& d, int64_t h, int64_t i, int64_t j0, int64_t n, T* s) const {
    const int64_t p = query_position(d, i);
    if (alibi) {
      const T slope = static_cast<T>(alibi_slope(first_head + h, model_heads > 0 ? model_heads : d.heads));
      for (int64_t jj = 0; jj < n; ++jj) {
        const int64_t distance = p - (j0 + jj);
        s[jj] -= slope * static_cast<T>(distance < 0 ? -distance : distance);
      }
    }
    if (relative_buckets > 0) {
      const T* table = static_cast<const T*>(relative_bias) + (first_head + h) * relative_buckets;
      const int32_t* bucket = bucket_of + (p - j0) + d.kv_len - 1;  // bucket[-jj]: key j0 + jj
      for (int64_t jj = 0; jj < n; ++jj) s[jj] += table[bucket[-jj]];
    }
    if (logit_softcap > 0) {
      const T c = static_cast<T>(logit_softcap), inv_c = static_cast<T>(1 / logit_softcap);
      for (int64_t jj = 0; jj < n; ++jj) s[jj] = c * std::tanh(s[jj] * inv_c);
    }
  }

  // The backward of modify over the same run: ds[0 .. n) holds dL/ds' (times any factor the kernel
  // folds in, e.g. its scale) and p[0 .. n) the probabilities exp(s' - lse) (0 where masked), from
  // which a modifier recovers s' = lse + ln p. chain() turns ds into dL/ds by the chain rule, in
  // reverse order of modify; add_param_grads() then adds the learned modifiers' gradients (T5's
  // table: dS by bucket, times ds_scale) into dtable (model heads, buckets). chain() touches only
  // the row, so rows may run in parallel; a kernel that parallelises otherwise calls them apart.
  template <class T>
  void backward(const AttentionDims& d, int64_t h, int64_t i, int64_t j0, int64_t n, const T* p, T lse, T* ds,
                T ds_scale, T* dtable) const {
    chain(n, p, lse, ds);
    add_param_grads(d, h, i, j0, n, ds, ds_scale, dtable);
  }
  template <class T>
  void chain(int64_t n, const T* p, T lse, T* ds) const {
    if (logit_softcap > 0) {
      const T inv_c = static_cast<T>(1 / logit_softcap);
      for (int64_t jj = 0; jj < n; ++jj) {
        const T t = p[jj] > 0 ? (lse + std::log(p[jj])) * inv_c : T(0);  // tanh(s / c); ds = 0 where p = 0
        ds[jj] *= 1 - t * t;
      }
    }
  }
  template <class T>
  void add_param_grads(const AttentionDims& d, int64_t h, int64_t i, int64_t j0, int64_t n, const T* ds, T ds_scale,
                       T* dtable) const {
    if (relative_buckets <= 0 || !dtable || n <= 0) return;
    T* row = dtable + (first_head + h) * relative_buckets;
    const int32_t* bucket = bucket_of + (query_position(d, i) - j0) + d.kv_len - 1;
    for (int64_t jj = 0; jj < n; ++jj) row[bucket[-jj]] += ds_scale * ds[jj];
  }
};

// bucket_of for AttentionScores: t5_bucket of every distance a call with T_k keys can meet, 2 T_k - 1
// entries (none when the variant has no buckets); the second form writes them to `out` (a decoding
// step's pooled scratch: no allocation).
std::vector<int32_t> relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len);
void relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len, int32_t* out);

}  // namespace tf::kernels

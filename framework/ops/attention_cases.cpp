// Gradient-check cases for attention and attention_qkv: every mask combination, rows with no
// visible key, grouped heads, T_q != T_k, dropout with a fixed seed, a value size unlike the key
// size, odd sizes, and the variants (window, ALiBi, T5's learned relative bias, and every row of
// Note [variant options]).
#include "framework/ops/attention.h"
#include "framework/ops/cases.h"

namespace tf::ops {

namespace {

// Shapes of one case: q (B, H, T_q, D), k (B, H_kv, T_k, D), v (B, H_kv, T_k, D_v).
struct Sizes {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim;
  std::string to_string() const {  // "q (B, H, T_q, D) kv (B, H_kv, T_k, D)", + D_v when it differs
    std::string s = "q " + Shape{batch, heads, q_len, head_dim}.to_string() + " kv " +
                    Shape{batch, kv_heads, kv_len, head_dim}.to_string();
    return value_dim == head_dim ? s : s + " D_v " + std::to_string(value_dim);
  }
};

void add_case(std::vector<OpCase>& cases, const std::string& name, Sizes s, AttentionOptions options) {
  cases.push_back({name, s.to_string(),
                   [s](Rng& rng) {
                     return std::vector<Tensor>{
                         gradcheck_input(rng, {s.batch, s.heads, s.q_len, s.head_dim}, "q"),
                         gradcheck_input(rng, {s.batch, s.kv_heads, s.kv_len, s.head_dim}, "k"),
                         gradcheck_input(rng, {s.batch, s.kv_heads, s.kv_len, s.value_dim}, "v")};
                   },
                   [options](const std::vector<Tensor>& in) { return attention(in[0], in[1], in[2], options); }});
}

// T5's relative bias (Note [attention variants]): the table (H, buckets) is a fourth input, checked
// like q, k and v.
void add_t5_case(std::vector<OpCase>& cases, const std::string& name, Sizes s, AttentionOptions options) {
  cases.push_back({name, s.to_string() + " buckets " + std::to_string(options.variant.relative_buckets),
                   [s, options](Rng& rng) {
                     return std::vector<Tensor>{
                         gradcheck_input(rng, {s.batch, s.heads, s.q_len, s.head_dim}, "q"),
                         gradcheck_input(rng, {s.batch, s.kv_heads, s.kv_len, s.head_dim}, "k"),
                         gradcheck_input(rng, {s.batch, s.kv_heads, s.kv_len, s.value_dim}, "v"),
                         gradcheck_input(rng, {s.heads, options.variant.relative_buckets}, "relative_bias")};
                   },
                   [options](const std::vector<Tensor>& in) {
                     AttentionOptions o = options;
                     o.relative_bias = in[3];
                     return attention(in[0], in[1], in[2], o);
                   }});
}

// A case with T5's table as an input when the variant has one.
void add_any_case(std::vector<OpCase>& cases, const std::string& name, Sizes s, AttentionOptions options) {
  if (options.variant.relative_buckets > 0) add_t5_case(cases, name, s, options);
  else add_case(cases, name, s, options);
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& cases) {
  add_case(cases, "attention", {2, 2, 2, 3, 3, 4, 4}, {});
  add_case(cases, "attention (causal)", {1, 2, 2, 5, 5, 3, 3}, {.causal = true});
  add_case(cases, "attention (T=1, D=1)", {2, 1, 1, 1, 1, 1, 1}, {.causal = true});
  add_case(cases, "attention (T=3, D=3, scale .7)", {1, 1, 1, 3, 3, 3, 3}, {.scale = 0.7});

  // Entry 0 pads its last two keys; entry 1 pads key 0, so under a causal mask its query 0 sees
  // nothing (output 0, no gradient) and its query 1 sees only key 1.
  const Tensor padding = Tensor::from_vector({1, 1, 1, 0, 0, 0, 1, 1, 1, 1}, {2, 5}, DType::f64);
  add_case(cases, "attention (key padding)", {2, 2, 2, 5, 5, 3, 3}, {.key_padding = padding});
  add_case(cases, "attention (causal + padding)", {2, 2, 2, 5, 5, 3, 3},
           {.causal = true, .key_padding = padding});

  add_case(cases, "attention (GQA, H=4, H_kv=2)", {1, 4, 2, 3, 4, 3, 3}, {});
  add_case(cases, "attention (GQA, causal + padding)", {2, 4, 2, 5, 5, 2, 2},
           {.causal = true, .key_padding = padding});
  // T_q < T_k: queries continue a cached prefix. T_q > T_k with causal: queries 0 and 1 see no key.
  add_case(cases, "attention (causal, T_q=3 < T_k=5)", {1, 2, 1, 3, 5, 3, 3}, {.causal = true});
  add_case(cases, "attention (causal, T_q=5 > T_k=3)", {1, 1, 1, 5, 3, 3, 3}, {.causal = true});
  add_case(cases, "attention (dropout 0.3, seed 7)", {2, 2, 2, 5, 5, 3, 3},
           {.causal = true, .dropout = 0.3, .dropout_seed = 7});
  add_case(cases, "attention (D_v=5 != D=3)", {1, 2, 1, 3, 5, 3, 5}, {});

  // Variants (Note [attention variants]): a sliding window, causal and both ways; ALiBi with a head
  // count that is not a power of two, both ways with padding, and over a cached prefix.
  add_case(cases, "attention (window 2, causal)", {1, 2, 2, 5, 5, 3, 3}, {.causal = true, .variant = {.window = 2}});
  add_case(cases, "attention (window 2, bidirectional)", {1, 2, 1, 5, 5, 3, 3}, {.variant = {.window = 2}});
  add_case(cases, "attention (ALiBi, H=3, causal)", {1, 3, 3, 4, 4, 2, 2}, {.causal = true, .variant = {.alibi = true}});
  add_case(cases, "attention (ALiBi, bidirectional + padding)", {2, 2, 2, 5, 5, 3, 3},
           {.key_padding = padding, .variant = {.alibi = true}});
  add_case(cases, "attention (ALiBi + window 3, T_q=2 < T_k=5)", {1, 4, 2, 2, 5, 3, 3},
           {.causal = true, .variant = {.window = 3, .alibi = true}});
  // T5 bias with 4 buckets and max distance 4: distances 0, 1 exact, 2 and 3 logarithmic, 4+ shared,
  // so several scores share one bucket and their gradients add up; both ways (keys after the query
  // get their own half) with padding.
  // Sparse patterns: Longformer's global tokens, BigBird's random blocks, on a window.
  add_case(cases, "attention (Longformer: window 2 + 1 global, bidirectional)", {1, 2, 1, 6, 6, 3, 3},
           {.variant = {.window = 2, .global_tokens = 1}});
  add_case(cases, "attention (BigBird: window 2, 1 global, 1 random block of 2, causal)", {2, 2, 2, 8, 8, 2, 2},
           {.causal = true, .variant = {.window = 2, .global_tokens = 1, .random_blocks = 1, .sparse_block = 2,
                                        .random_seed = 3}});
  add_t5_case(cases, "attention (T5 bias, causal)", {1, 2, 2, 6, 6, 3, 3},
              {.causal = true, .variant = {.relative_buckets = 4, .relative_max_distance = 4}});
  add_t5_case(cases, "attention (T5 bias, bidirectional + padding, GQA)", {2, 4, 2, 5, 5, 2, 2},
              {.key_padding = padding, .variant = {.relative_buckets = 6, .relative_max_distance = 8}});

  // attention_qkv on the fused projection's output (B, T, (H + 2 H_kv) D): in float64 it is the
  // composition with split_heads and merge_heads; its float32 in-place path is held to that
  // composition bit for bit (tests/framework/heads_test.cpp).
  cases.push_back({"attention_qkv (GQA, causal + padding)", "(2, 5, (4 + 2 x 2) x 2) -> (2, 5, 4 x 2)",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {2, 5, 16}, "qkv")}; },
                   [padding](const std::vector<Tensor>& in) {
                     return attention_qkv(in[0], 4, 2, {.causal = true, .key_padding = padding});
                   }});

  // Every row of Note [variant options] by its example, so that a new row is gradient-checked
  // without a line here: causal, both ways with padding, and after T5's learned bias (a score
  // modifier's derivative then reaches the table's gradient too).
  for (const kernels::VariantOption& option : kernels::kVariantOptions) {
    const std::string name = std::string("attention (") + option.key;
    add_any_case(cases, name + ", causal)", {1, 2, 2, 6, 6, 3, 3}, {.causal = true, .variant = option.example});
    add_any_case(cases, name + ", bidirectional + padding)", {2, 2, 1, 5, 5, 3, 3},
                 {.key_padding = padding, .variant = option.example});
    if (option.example.relative_buckets > 0) continue;
    kernels::AttentionVariant with_t5 = option.example;
    with_t5.relative_buckets = 4;
    with_t5.relative_max_distance = 4;
    add_any_case(cases, name + " after T5's bias, causal, T_q=2 < T_k=5)", {1, 2, 2, 2, 5, 3, 3},
                 {.causal = true, .variant = with_t5});
  }
}

}  // namespace tf::ops

// Gradient-check cases for differential attention: lambda's re-parameterisation alone, then the
// two-map op with lambda as an input (so its gradient is checked too), causal and not, grouped
// key/value heads, key padding, a window, odd sizes.
#include "framework/ops/cases.h"
#include "framework/ops/differential_attention.h"

namespace tf::ops {

namespace {

// q1, q2 (B, H, T, D); k1, k2 (B, G, T, D); v (B, G, T, Dv); lambda a scalar input.
struct Sizes {
  int64_t batch, heads, kv_heads, seq_len, head_dim, value_dim;
};

void add_case(std::vector<OpCase>& cases, const std::string& name, Sizes s, AttentionOptions options) {
  const Shape qs{s.batch, s.heads, s.seq_len, s.head_dim}, ks{s.batch, s.kv_heads, s.seq_len, s.head_dim};
  const Shape vs{s.batch, s.kv_heads, s.seq_len, s.value_dim};
  cases.push_back({name, "q " + qs.to_string() + " k " + ks.to_string() + " v " + vs.to_string(),
                   [qs, ks, vs](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, qs, "q1"), gradcheck_input(rng, ks, "k1"),
                                                gradcheck_input(rng, qs, "q2"), gradcheck_input(rng, ks, "k2"),
                                                gradcheck_input(rng, vs, "v"), gradcheck_input(rng, {}, "lambda")};
                   },
                   [options](const std::vector<Tensor>& in) {
                     return differential_attention(in[0], in[1], in[2], in[3], in[4], in[5], options);
                   }});
}

}  // namespace

void add_differential_attention_cases(std::vector<OpCase>& cases) {
  cases.push_back({"differential_lambda", "4 x (5), lambda_init 0.2",
                   [](Rng& rng) {
                     std::vector<Tensor> in;
                     for (const char* name : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"})
                       in.push_back(gradcheck_input(rng, {5}, name));
                     return in;
                   },
                   [](const std::vector<Tensor>& in) { return differential_lambda(in[0], in[1], in[2], in[3], 0.2); }});
  add_case(cases, "differential_attention (causal)", {2, 2, 2, 5, 3, 6}, {.causal = true});
  add_case(cases, "differential_attention (not causal, key padding)", {2, 1, 1, 4, 2, 4},
           {.key_padding = Tensor::from_vector({1, 1, 1, 0, 1, 1, 1, 1}, {2, 4}, DType::f64)});
  add_case(cases, "differential_attention (grouped, odd sizes)", {1, 3, 1, 7, 3, 5}, {.causal = true});
  add_case(cases, "differential_attention (causal, window 2)", {1, 2, 1, 5, 2, 4},
           {.causal = true, .variant = {.window = 2}});
}

}  // namespace tf::ops

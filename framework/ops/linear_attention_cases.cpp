// Gradient-check cases for linear attention: causal and not, a value size unlike the key size,
// odd sizes, one position. float64 takes the pairwise reference kernel; the chunked kernel (and its
// chunk boundaries) is held to it in tests/framework/linear_attention_test.cpp.
#include "framework/ops/cases.h"
#include "framework/ops/linear_attention.h"

namespace tf::ops {

namespace {

void add_case(std::vector<OpCase>& cases, const std::string& name, Shape qk, int64_t value_dim,
              LinearAttentionOptions options) {
  const Shape vs{qk[0], qk[1], qk[2], value_dim};
  cases.push_back({name, "q, k " + qk.to_string() + " v " + vs.to_string(),
                   [qk, vs](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, qk, "q"), gradcheck_input(rng, qk, "k"),
                                                gradcheck_input(rng, vs, "v")};
                   },
                   [options](const std::vector<Tensor>& in) { return linear_attention(in[0], in[1], in[2], options); }});
}

}  // namespace

void add_linear_attention_cases(std::vector<OpCase>& cases) {
  add_case(cases, "linear_attention (causal)", {2, 2, 5, 4}, 4, {});
  add_case(cases, "linear_attention (causal, D_v 3, odd sizes)", {1, 3, 7, 5}, 3, {});
  add_case(cases, "linear_attention (not causal)", {2, 1, 6, 3}, 5, {.causal = false});
  add_case(cases, "linear_attention (one position)", {1, 2, 1, 4}, 2, {});
  // Padded keys take no part: the last two keys of sequence 0 (their dk must come out 0).
  add_case(cases, "linear_attention (not causal, key padding)", {2, 2, 5, 3}, 2,
           {.causal = false, .key_padding = Tensor::from_vector({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, {2, 5}, DType::f64)});
}

}  // namespace tf::ops

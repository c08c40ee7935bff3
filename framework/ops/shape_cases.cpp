// Gradient-check cases for reshape, transpose, permute, concat, split (including unused split
// outputs), split_heads and merge_heads, and an attention-like chain of ~15 ops mixing every family.
#include "framework/ops/cases.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/heads.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"

namespace tf::ops {

void add_shape_cases(std::vector<OpCase>& cases) {
  auto one = [](Shape s) {
    return [s](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, s, "x")}; };
  };
  using In = const std::vector<Tensor>&;
  // Shape ops alone are linear maps; a following mul makes each output element's weight differ
  // from its neighbours', so a permutation error could not cancel out.
  cases.push_back({"reshape (-1)", "(2, 6) -> (3, -1) -> (3, 4)", one({2, 6}),
                   [](In in) { return reshape(in[0], {3, -1}); }});
  cases.push_back({"reshape (to rank 0 and back)", "(1, 1) -> () -> (1,)", one({1, 1}),
                   [](In in) { return reshape(reshape(in[0], Shape{}), {-1}); }});
  cases.push_back({"transpose", "(3, 5) axes 0, 1", one({3, 5}), [](In in) { return transpose(in[0], 0, 1); }});
  cases.push_back({"transpose (heads)", "(2, 3, 4, 5) axes 1, 2: (B, T, H, D) -> (B, H, T, D)", one({2, 3, 4, 5}),
                   [](In in) { return transpose(in[0], 1, 2); }});
  cases.push_back({"transpose (negative axes)", "(2, 3, 4) axes -1, -3", one({2, 3, 4}),
                   [](In in) { return transpose(in[0], -1, -3); }});
  cases.push_back({"permute", "(2, 3, 4, 5) order (3, 0, 2, 1)", one({2, 3, 4, 5}),
                   [](In in) { return permute(in[0], {3, 0, 2, 1}); }});
  cases.push_back({"permute (negative axes, reused)", "(3, 1, 4) order (-1, 0, 1), times itself permuted",
                   one({3, 1, 4}), [](In in) {
                     const Tensor p = permute(in[0], {-1, 0, 1});  // (4, 3, 1)
                     return mul(p, permute(reshape(in[0], {4, 1, 3}), {0, 2, 1}));
                   }});
  cases.push_back({"concat", "(2, 3) ++ (4, 3) ++ (1, 3) on axis 0",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3}, "a"), gradcheck_input(rng, {4, 3}, "b"),
                                                gradcheck_input(rng, {1, 3}, "c")};
                   },
                   [](In in) { return concat({in[0], in[1], in[2]}, 0); }});
  cases.push_back({"concat (inner axis, one constant)", "(2, 1, 3) ++ const (2, 2, 3) on axis -2",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 1, 3}, "a"),
                                                randn({2, 2, 3}, rng, 1.0, DType::f64).set_name("const")};
                   },
                   [](In in) { return concat({in[0], in[1]}, -2); }});
  cases.push_back({"concat (same tensor twice)", "a ++ a on axis 1", one({3, 2}),
                   [](In in) { return concat({in[0], in[0]}, 1); }});
  cases.push_back({"split", "(3, 7) into (2, 4, 1) on axis -1, rejoined in another order", one({3, 7}), [](In in) {
                     const auto parts = split(in[0], {2, 4, 1}, -1);
                     return concat({parts[2], parts[0], parts[1]}, 1);
                   }});
  cases.push_back({"split (unused outputs)", "(2, 6, 2) into (1, 3, 2) on axis 1, only the middle used",
                   one({2, 6, 2}), [](In in) { return split(in[0], {1, 3, 2}, 1)[1]; }});
  cases.push_back({"split (outputs reused)", "(4, 3) into (1, 3) on axis 0: a * b + b", one({4, 3}), [](In in) {
                     const auto parts = split(in[0], {1, 3}, 0);
                     return add(mul(parts[0], parts[1]), parts[1]);
                   }});

  cases.push_back({"split_heads", "(2, 3, (2 + 1 + 1) x 2) into (2, 2, 3, 2), (2, 1, 3, 2) x 2, mixed",
                   one({2, 3, 8}), [](In in) {
                     const auto qkv = split_heads(in[0], {2, 1, 1}, 2);
                     return add(mul(qkv[0], qkv[1]), qkv[2]);  // k, v broadcast over the 2 query heads
                   }});
  cases.push_back({"split_heads (unused group)", "(1, 4, 6) into 3 groups of 1 head of 2, the middle unused",
                   one({1, 4, 6}), [](In in) {
                     const auto parts = split_heads(in[0], {1, 1, 1}, 2);
                     return mul(parts[0], parts[2]);
                   }});
  cases.push_back({"merge_heads", "(2, 3, 4, 2) -> (2, 4, 6)", one({2, 3, 4, 2}),
                   [](In in) { return merge_heads(in[0]); }});

  // A one-layer attention in miniature (Vaswani et al. 2017, eq. 1), then a log-softmax readout:
  // linear -> split -> reshape -> transpose -> matmul -> scale -> softmax -> matmul -> transpose ->
  // reshape -> concat -> log_softmax -> mul -> mean -> sum.
  cases.push_back({"composite: attention-like chain", "x (2, 3, 4), W (12, 4), b (12,), 2 heads of 2",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 4}, "x"),
                                                gradcheck_input(rng, {12, 4}, "weight", 0.5),
                                                gradcheck_input(rng, {12}, "bias")};
                   },
                   [](In in) {
                     const int64_t B = 2, T = 3, H = 2, D = 2;
                     const Tensor qkv = linear(in[0], in[1], in[2]);  // (B, T, 3C)
                     const auto parts = split(qkv, {H * D, H * D, H * D}, -1);
                     auto heads = [&](const Tensor& t) { return transpose(reshape(t, {B, T, H, D}), 1, 2); };
                     const Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);  // (B, H, T, D)
                     const Tensor probs = softmax(scale(matmul(q, k, false, true), 0.7));        // (B, H, T, T)
                     const Tensor attended = reshape(transpose(matmul(probs, v), 1, 2), {B, T, -1});  // (B, T, C)
                     const Tensor joined = concat({attended, parts[0]}, -1);                      // (B, T, 2C)
                     const Tensor logprobs = log_softmax(joined);
                     return sum(mean(mul(logprobs, joined), {0}), {-1});  // (T,)
                   }});
}

}  // namespace tf::ops

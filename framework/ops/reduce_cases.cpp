// Gradient-check cases for sum and mean: every axis, chosen (negative, non-adjacent) axes, keepdim,
// odd shapes, and the broadcast-back composites layer norm and normalisation are built from.
#include "framework/ops/cases.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"

namespace tf::ops {

void add_reduce_cases(std::vector<OpCase>& cases) {
  auto one = [](Shape s) {
    return [s](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, s, "x")}; };
  };
  using In = const std::vector<Tensor>&;
  cases.push_back({"sum (all)", "(3, 5) -> ()", one({3, 5}), [](In in) { return sum(in[0]); }});
  cases.push_back({"sum (rank 0)", "() -> ()", one({}), [](In in) { return sum(in[0]); }});
  cases.push_back({"sum (last axis)", "(2, 3, 7) -> (2, 3)", one({2, 3, 7}), [](In in) { return sum(in[0], {-1}); }});
  cases.push_back({"sum (first axis, keepdim)", "(5, 3) -> (1, 3)", one({5, 3}),
                   [](In in) { return sum(in[0], {0}, true); }});
  cases.push_back({"sum (non-adjacent axes)", "(2, 3, 4, 5) over {0, -2} -> (3, 5)", one({2, 3, 4, 5}),
                   [](In in) { return sum(in[0], {0, -2}); }});
  cases.push_back({"sum (middle axes, keepdim)", "(2, 3, 4, 1) over {1, 2} -> (2, 1, 1, 1)", one({2, 3, 4, 1}),
                   [](In in) { return sum(in[0], {1, 2}, true); }});
  cases.push_back({"mean (all)", "(7, 3) -> ()", one({7, 3}), [](In in) { return mean(in[0]); }});
  cases.push_back({"mean (axes {-1, 0}, keepdim)", "(3, 2, 5) -> (1, 2, 1)", one({3, 2, 5}),
                   [](In in) { return mean(in[0], {-1, 0}, true); }});
  cases.push_back({"mean (unit axis)", "(1, 4) over {0} -> (4,)", one({1, 4}), [](In in) { return mean(in[0], {0}); }});
  // x - mean(x): the centring step of layer norm (Ba et al. 2016, eq. 4), through broadcasting.
  cases.push_back({"composite: centre rows", "(3, 6) - mean over -1, keepdim", one({3, 6}),
                   [](In in) { return sub(in[0], mean(in[0], {-1}, true)); }});
  // Variance: mean((x - mu)^2), the same chain layer norm differentiates through.
  cases.push_back({"composite: row variance", "(4, 5) -> (4, 1)", one({4, 5}), [](In in) {
                     const Tensor centred = sub(in[0], mean(in[0], {-1}, true));
                     return mean(mul(centred, centred), {-1}, true);
                   }});
  // x / sum(x) over columns, keeping the denominator away from zero.
  cases.push_back({"composite: column normalise", "(5, 3) / sum over 0, keepdim",
                   [](Rng& rng) {
                     return std::vector<Tensor>{
                         rand_uniform({5, 3}, rng, 0.5, 2.0, DType::f64).set_requires_grad().set_name("x")};
                   },
                   [](In in) { return div(in[0], sum(in[0], {0}, true)); }});
}

}  // namespace tf::ops

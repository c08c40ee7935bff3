// Gradient-check cases for softmax and log_softmax: odd row lengths, one-column rows, large
// logits (where the max subtraction matters), and products that weight the outputs unevenly.
#include "framework/ops/cases.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/reduce.h"
#include "framework/ops/softmax.h"

namespace tf::ops {

void add_softmax_cases(std::vector<OpCase>& cases) {
  auto one = [](Shape s, double std = 1.0) {
    return [s, std](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, s, "x", std)}; };
  };
  using In = const std::vector<Tensor>&;
  cases.push_back({"softmax", "(3, 5)", one({3, 5}), [](In in) { return softmax(in[0]); }});
  cases.push_back({"softmax (rank 4, odd)", "(2, 1, 3, 7)", one({2, 1, 3, 7}), [](In in) { return softmax(in[0]); }});
  cases.push_back({"softmax (one column)", "(4, 1): constant 1, zero gradient", one({4, 1}),
                   [](In in) { return softmax(in[0]); }});
  cases.push_back({"softmax (vector)", "(6,)", one({6}), [](In in) { return softmax(in[0]); }});
  // Logits near 300 would overflow exp without the max subtraction even in float64 (e^710 = inf).
  cases.push_back({"softmax (large logits)", "(2, 4) + 800",
                   [](Rng& rng) {
                     Tensor x = gradcheck_input(rng, {2, 4}, "x");
                     for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] += 800.0;
                     return std::vector<Tensor>{x};
                   },
                   [](In in) { return softmax(in[0]); }});
  cases.push_back({"log_softmax", "(3, 5)", one({3, 5}), [](In in) { return log_softmax(in[0]); }});
  cases.push_back({"log_softmax (rank 3, odd)", "(2, 3, 9), std 3", one({2, 3, 9}, 3.0),
                   [](In in) { return log_softmax(in[0]); }});
  cases.push_back({"log_softmax (one column)", "(3, 1): constant 0", one({3, 1}),
                   [](In in) { return log_softmax(in[0]); }});
  // Entropy of each row, -sum(p log p): softmax and log_softmax of the same input together.
  cases.push_back({"composite: row entropy", "(4, 6) -> (4,)", one({4, 6}), [](In in) {
                     return neg(sum(mul(softmax(in[0]), log_softmax(in[0])), {-1}));
                   }});
  // Temperature-scaled softmax of a difference with a broadcast row (as attention adds a mask/bias).
  cases.push_back({"composite: softmax of a broadcast sum", "((2, 3, 5) + (5,)) / 0.5",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "scores"),
                                                gradcheck_input(rng, {5}, "bias")};
                   },
                   [](In in) { return softmax(scale(add(in[0], in[1]), 2.0)); }});
}

}  // namespace tf::ops

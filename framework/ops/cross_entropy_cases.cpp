// Gradient-check cases for cross_entropy. Targets are i32 and not differentiated, so each case
// captures its targets in the forward lambda; only the float64 logits are checked.
#include "framework/ops/cases.h"
#include "framework/ops/cross_entropy.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"

namespace tf::ops {

void add_cross_entropy_cases(std::vector<OpCase>& cases) {
  auto logits = [](Shape s, double std = 1.0) {
    return [s, std](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, s, "logits", std)}; };
  };
  using In = const std::vector<Tensor>&;
  auto ce = [](std::vector<int32_t> ids, Shape target_shape, CrossEntropyOptions o = {}) {
    return [ids, target_shape, o](In in) { return cross_entropy(in[0], Tensor::from_ids(ids, target_shape), o); };
  };
  cases.push_back({"cross_entropy", "(4, 5), mean", logits({4, 5}), ce({0, 4, 2, 2}, {4})});
  cases.push_back({"cross_entropy (sum)", "(3, 7), sum", logits({3, 7}),
                   ce({6, 0, 3}, {3}, {.reduction = Reduction::sum})});
  cases.push_back({"cross_entropy (ignore_index)", "(5, 3), rows 1 and 3 ignored", logits({5, 3}),
                   ce({2, -100, 0, -100, 1}, {5})});
  cases.push_back({"cross_entropy (custom ignore_index, sum)", "(4, 3), ignore 0", logits({4, 3}),
                   ce({0, 1, 2, 0}, {4}, {.ignore_index = 0, .reduction = Reduction::sum})});
  cases.push_back({"cross_entropy (all ignored)", "(2, 4): loss 0, zero gradient", logits({2, 4}),
                   ce({-100, -100}, {2})});
  cases.push_back({"cross_entropy (rank 3)", "(2, 3, 6) logits, (2, 3) targets, std 4", logits({2, 3, 6}, 4.0),
                   ce({5, 0, 1, -100, 3, 3}, {2, 3})});
  cases.push_back({"cross_entropy (one class)", "(3, 1): loss 0", logits({3, 1}), ce({0, 0, 0}, {3})});
  // A language-model head end to end: linear -> reshape -> cross_entropy, plus a log_softmax
  // readout of the same logits (as an evaluator would also report), summed into one loss.
  cases.push_back({"composite: lm head", "x (2, 3, 4), W (5, 4) -> (6, 5) logits",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 4}, "x"),
                                                gradcheck_input(rng, {5, 4}, "weight")};
                   },
                   [](In in) {
                     const Tensor flat = reshape(linear(in[0], in[1]), {-1, 5});  // (6, 5)
                     const Tensor targets = Tensor::from_ids({4, 0, 2, -100, 1, 1}, {6});
                     const Tensor loss = cross_entropy(flat, targets);
                     return sum(reshape(loss, {1}), {0});
                   }});
  cases.push_back({"composite: cross_entropy and a log_softmax pick", "(3, 4): ce + 3 mean(log p_t) = -2 ce",
                   logits({3, 4}), [](In in) {
                     // -mean_r log_softmax(x)[r, t_r] with t = (1, 3, 0), picked by a constant one-hot mask.
                     const Tensor onehot = Tensor::from_vector({0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, {3, 4}, DType::f64);
                     const Tensor picked = mean(sum(mul(log_softmax(in[0]), onehot), {-1}));
                     return add(cross_entropy(in[0], Tensor::from_ids({1, 3, 0}, {3})), scale(picked, 3.0));
                   }});
}

}  // namespace tf::ops

// Gradient-check cases for matmul (every transpose combination, batched, shared weight), linear and
// gelu_linear.
#include "framework/ops/cases.h"
#include "framework/ops/matmul.h"

namespace tf::ops {

void add_matmul_cases(std::vector<OpCase>& cases) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Shape sa = ta ? Shape{2, 5, 3} : Shape{2, 3, 5};
      const Shape sb = tb ? Shape{2, 4, 5} : Shape{2, 5, 4};
      std::string name = std::string("matmul") + (ta ? " trans_a" : "") + (tb ? " trans_b" : "");
      cases.push_back({name, sa.to_string() + (ta ? "^T" : "") + " . " + sb.to_string() + (tb ? "^T" : ""),
                       [sa, sb](Rng& rng) {
                         return std::vector<Tensor>{gradcheck_input(rng, sa, "a"), gradcheck_input(rng, sb, "b")};
                       },
                       [ta, tb](const std::vector<Tensor>& in) { return matmul(in[0], in[1], ta, tb); }});
    }
  }
  for (bool tb : {false, true}) {
    const Shape sb = tb ? Shape{4, 5} : Shape{5, 4};
    cases.push_back({std::string("matmul shared matrix") + (tb ? " trans_b" : ""),
                     "(2, 3, 5) . " + sb.to_string() + (tb ? "^T" : ""),
                     [sb](Rng& rng) {
                       return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "a"), gradcheck_input(rng, sb, "b")};
                     },
                     [tb](const std::vector<Tensor>& in) { return matmul(in[0], in[1], false, tb); }});
  }
  cases.push_back({"linear", "(2, 3, 5) -> 4, with bias",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "x"),
                                                gradcheck_input(rng, {4, 5}, "weight"),
                                                gradcheck_input(rng, {4}, "bias")};
                   },
                   [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); }});
  cases.push_back({"linear (no bias)", "(7, 3) -> 1",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {7, 3}, "x"), gradcheck_input(rng, {1, 3}, "weight")};
                   },
                   [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }});
  for (kernels::GeluApprox approx : {kernels::GeluApprox::tanh, kernels::GeluApprox::erf}) {
    // std 2 for the pre-activation: both GELU tails, as in the gelu cases.
    cases.push_back({std::string("gelu_linear ") + kernels::gelu_approx_name(approx), "(2, 3, 5) -> 4, with bias",
                     [](Rng& rng) {
                       return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "pre_activation", 2.0),
                                                  gradcheck_input(rng, {4, 5}, "weight"),
                                                  gradcheck_input(rng, {4}, "bias")};
                     },
                     [approx](const std::vector<Tensor>& in) { return gelu_linear(in[0], in[1], in[2], approx); }});
  }
}

}  // namespace tf::ops

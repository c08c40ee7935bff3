// Gradient-check cases for GELU (both forms, with and without a fused bias), ReLU (with inputs
// exactly at its kink, 0, which the gradcheck must step off), and every gated linear unit.
#include "framework/ops/activation.h"
#include "framework/ops/cases.h"

namespace tf::ops {

void add_activation_cases(std::vector<OpCase>& cases) {
  for (GeluApprox approx : {GeluApprox::tanh, GeluApprox::erf}) {
    const std::string form = kernels::gelu_approx_name(approx);
    // std 2: reaches both tails, where the tanh and erf forms differ most from linear.
    cases.push_back({"gelu " + form, "(3, 7)",
                     [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {3, 7}, "x", 2.0)}; },
                     [approx](const std::vector<Tensor>& in) { return gelu(in[0], approx); }});
    cases.push_back({"bias_gelu " + form, "(2, 3, 5) + (5,)",
                     [](Rng& rng) {
                       return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "x", 2.0),
                                                  gradcheck_input(rng, {5}, "bias")};
                     },
                     [approx](const std::vector<Tensor>& in) { return bias_gelu(in[0], in[1], approx); }});
  }
  cases.push_back({"relu", "(4, 6), five entries exactly 0",
                   [](Rng& rng) {
                     Tensor x = gradcheck_input(rng, {4, 6}, "x");
                     for (int64_t i : {0, 5, 11, 17, 23}) x.data<double>()[i] = 0.0;  // on the kink
                     return std::vector<Tensor>{x};
                   },
                   [](const std::vector<Tensor>& in) { return relu(in[0]); }});
  // Every row of Note [feed-forward kinds] but GELU's (checked above): std 3 puts gates deep in
  // both tails of a sigmoid, where a careless derivative loses its terms.
  for (const kernels::FeedForwardKindRow& row : kernels::kFeedForwardKindTable) {
    const FeedForwardKind kind = row.kind;
    if (row.gated)
      cases.push_back({std::string("glu ") + row.name, "(2, 3, 2 x 5) -> (2, 3, 5)",
                       [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 10}, "h", 3.0)}; },
                       [kind](const std::vector<Tensor>& in) { return glu(in[0], kind); }});
    else if (row.activation)
      cases.push_back({std::string("feed_forward_activation ") + row.name, "(2, 3, 5)",
                       [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 5}, "x", 3.0)}; },
                       [kind](const std::vector<Tensor>& in) { return feed_forward_activation(in[0], kind); }});
  }
}

}  // namespace tf::ops

// Gradient-check cases for the pointwise functions; std 3 reaches both tails of the sigmoid inside
// SiLU and softplus, and softplus's threshold at 20 is crossed by the entries set past it.
#include "framework/ops/cases.h"
#include "framework/ops/pointwise.h"

namespace tf::ops {

void add_pointwise_cases(std::vector<OpCase>& cases) {
  cases.push_back({"exp", "(3, 5)", [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {3, 5}, "x")}; },
                   [](const std::vector<Tensor>& in) { return exp(in[0]); }});
  cases.push_back({"silu", "(4, 6)",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {4, 6}, "x", 3.0)}; },
                   [](const std::vector<Tensor>& in) { return silu(in[0]); }});
  cases.push_back({"softplus", "(4, 6), two entries past 20",
                   [](Rng& rng) {
                     Tensor x = gradcheck_input(rng, {4, 6}, "x", 3.0);
                     x.data<double>()[3] = 21.5, x.data<double>()[7] = 25.0;
                     return std::vector<Tensor>{x};
                   },
                   [](const std::vector<Tensor>& in) { return softplus(in[0]); }});
  cases.push_back({"tanh", "(4, 6)",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {4, 6}, "x", 3.0)}; },
                   [](const std::vector<Tensor>& in) { return tanh(in[0]); }});
  cases.push_back({"sigmoid", "(4, 6)",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {4, 6}, "x", 3.0)}; },
                   [](const std::vector<Tensor>& in) { return sigmoid(in[0]); }});
}

}  // namespace tf::ops

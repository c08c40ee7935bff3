// Gradient-check cases for elementwise ops, including broadcasting and a reused operand.
#include "framework/ops/cases.h"
#include "framework/ops/elementwise.h"

namespace tf::ops {

void add_elementwise_cases(std::vector<OpCase>& cases) {
  auto two = [](Shape sa, Shape sb) {
    return [sa, sb](Rng& rng) {
      return std::vector<Tensor>{gradcheck_input(rng, sa, "a"), gradcheck_input(rng, sb, "b")};
    };
  };
  cases.push_back({"add", "(3, 4) + (3, 4)", two({3, 4}, {3, 4}),
                   [](const std::vector<Tensor>& in) { return add(in[0], in[1]); }});
  cases.push_back({"add (broadcast)", "(2, 3, 4) + (4,)", two({2, 3, 4}, {4}),
                   [](const std::vector<Tensor>& in) { return add(in[0], in[1]); }});
  cases.push_back({"sub (broadcast)", "(2, 1, 4) - (3, 1)", two({2, 1, 4}, {3, 1}),
                   [](const std::vector<Tensor>& in) { return sub(in[0], in[1]); }});
  cases.push_back({"mul (broadcast)", "(2, 3, 4) * (1, 3, 1)", two({2, 3, 4}, {1, 3, 1}),
                   [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }});
  cases.push_back({"mul (reused operand)", "a * a", two({5}, {1}),
                   [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }});
  cases.push_back({"div (broadcast)", "(3, 4) / (4,)",
                   [](Rng& rng) {
                     Tensor b = rand_uniform({4}, rng, 0.5, 2.0, DType::f64).set_requires_grad().set_name("b");
                     return std::vector<Tensor>{gradcheck_input(rng, {3, 4}, "a"), b};
                   },
                   [](const std::vector<Tensor>& in) { return div(in[0], in[1]); }});
  cases.push_back({"scale", "0.7 * (2, 5)", two({2, 5}, {1}),
                   [](const std::vector<Tensor>& in) { return scale(in[0], 0.7); }});
}

}  // namespace tf::ops

// Gradient-check case for dropout: with its seed fixed the mask is a constant of the function, so
// dropout is linear in x and differentiable.
#include "framework/ops/cases.h"
#include "framework/ops/dropout.h"

namespace tf::ops {

void add_dropout_cases(std::vector<OpCase>& cases) {
  cases.push_back({"dropout", "(4, 5), p 0.3, seed 42",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {4, 5}, "x")}; },
                   [](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, 42); }});
}

}  // namespace tf::ops

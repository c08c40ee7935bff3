// Gradient-check cases for masked_fill: a causal mask broadcast over a batch of score matrices,
// and a per-row mask. Fill values are small: a huge one (-1e9, as attention might use) would
// enter the projected loss and raise the gradcheck's absolute floor until nothing could fail.
#include "framework/ops/cases.h"
#include "framework/ops/mask.h"

namespace tf::ops {

void add_mask_cases(std::vector<OpCase>& cases) {
  cases.push_back({"masked_fill (causal)", "(2, 4, 4) with causal mask (4, 4), fill -3",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {2, 4, 4}, "x")}; },
                   [](const std::vector<Tensor>& in) {
                     return masked_fill(in[0], causal_mask(4, 4, DType::f64), -3.0);
                   }});
  cases.push_back({"masked_fill (rows)", "(3, 5) with mask (3, 1), fill 2.5",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {3, 5}, "x")}; },
                   [](const std::vector<Tensor>& in) {
                     return masked_fill(in[0], Tensor::from_vector({0, 1, 0}, {3, 1}, DType::f64), 2.5);
                   }});
}

}  // namespace tf::ops

// Gradient-check cases for the causal depthwise convolution: with and without a bias, a filter
// longer than the sequence (every output sees the zero padding), one tap.
#include "framework/ops/causal_conv.h"
#include "framework/ops/cases.h"

namespace tf::ops {

namespace {

void add_case(std::vector<OpCase>& cases, const std::string& name, Shape x, int64_t taps, bool bias) {
  const Shape w{x[2], taps};
  cases.push_back({name, "x " + x.to_string() + " weight " + w.to_string(),
                   [x, w, bias](Rng& rng) {
                     std::vector<Tensor> in{gradcheck_input(rng, x, "x"), gradcheck_input(rng, w, "weight")};
                     if (bias) in.push_back(gradcheck_input(rng, {x[2]}, "bias"));
                     return in;
                   },
                   [](const std::vector<Tensor>& in) {
                     return causal_conv1d(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
                   }});
}

}  // namespace

void add_causal_conv_cases(std::vector<OpCase>& cases) {
  add_case(cases, "causal_conv1d (4 taps, bias)", {2, 6, 3}, 4, true);
  add_case(cases, "causal_conv1d (no bias, odd sizes)", {1, 7, 5}, 3, false);
  add_case(cases, "causal_conv1d (taps longer than T)", {2, 2, 2}, 4, true);
  add_case(cases, "causal_conv1d (one tap)", {1, 3, 4}, 1, true);
}

}  // namespace tf::ops

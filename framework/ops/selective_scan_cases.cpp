// Gradient-check cases for the selective scan. delta and A reach the scan as a Mamba block makes
// them, delta = softplus(raw) > 0 and A = -exp(a_log) < 0, so the check covers the decaying
// recurrence the block runs (and those two ops' gradients on the way). With and without the D skip,
// odd sizes, one position. Long sequences, where the channels split into several blocks, are held
// to a step-by-step recurrence in tests/framework/selective_scan_test.cpp.
#include "framework/ops/cases.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/pointwise.h"
#include "framework/ops/selective_scan.h"

namespace tf::ops {

namespace {

void add_case(std::vector<OpCase>& cases, const std::string& name, int64_t B, int64_t T, int64_t E, int64_t N,
              bool skip) {
  const Shape xs{B, T, E}, as{E, N}, bs{B, T, N};
  cases.push_back({name, "x " + xs.to_string() + " A " + as.to_string() + " B, C " + bs.to_string(),
                   [=](Rng& rng) {
                     std::vector<Tensor> in{gradcheck_input(rng, xs, "x"), gradcheck_input(rng, xs, "delta_raw"),
                                            gradcheck_input(rng, as, "a_log", 0.5), gradcheck_input(rng, bs, "b"),
                                            gradcheck_input(rng, bs, "c")};
                     if (skip) in.push_back(gradcheck_input(rng, {E}, "d"));
                     return in;
                   },
                   [](const std::vector<Tensor>& in) {
                     return selective_scan(in[0], softplus(in[1]), neg(exp(in[2])), in[3], in[4],
                                           in.size() > 5 ? in[5] : Tensor());
                   }});
}

}  // namespace

void add_selective_scan_cases(std::vector<OpCase>& cases) {
  add_case(cases, "selective_scan (D skip)", 2, 5, 3, 4, true);
  add_case(cases, "selective_scan (no skip, odd sizes)", 1, 7, 5, 3, false);
  add_case(cases, "selective_scan (one position)", 2, 1, 2, 2, true);
}

}  // namespace tf::ops

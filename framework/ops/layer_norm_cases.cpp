// Gradient-check cases for layer norm: with weight and bias, weight only, no affine part, and
// input rows far from zero mean (where a careless backward loses precision); add_layer_norm; and the
// same for RMSNorm (kind rms), whose rows far from zero mean are ordinary.
#include "framework/ops/cases.h"
#include "framework/ops/layer_norm.h"
#include "framework/ops/shape.h"

namespace tf::ops {

void add_layer_norm_cases(std::vector<OpCase>& cases) {
  cases.push_back({"layer_norm", "(2, 3, 6), weight and bias (6,)",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 6}, "x"),
                                                gradcheck_input(rng, {6}, "weight"), gradcheck_input(rng, {6}, "bias")};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }});
  cases.push_back({"layer_norm (weight only)", "(4, 5), weight (5,)",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {4, 5}, "x"), gradcheck_input(rng, {5}, "weight")};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor()); }});
  cases.push_back({"layer_norm (no affine, offset rows)", "(3, 7) + 5, eps 1e-3",
                   [](Rng& rng) {
                     Tensor x = gradcheck_input(rng, {3, 7}, "x");
                     for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] += 5.0;
                     return std::vector<Tensor>{x};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3); }});
  // add_layer_norm: both outputs reach the loss (h through the residual stream, n through the next
  // sublayer), as in the pre-LN block; then n alone; then one tensor as both summands.
  cases.push_back({"add_layer_norm", "(2, 3, 6) + (2, 3, 6), weight and bias (6,); h and n concatenated",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 6}, "x"), gradcheck_input(rng, {2, 3, 6}, "a"),
                                                gradcheck_input(rng, {6}, "weight"), gradcheck_input(rng, {6}, "bias")};
                   },
                   [](const std::vector<Tensor>& in) {
                     const ResidualNorm h = add_layer_norm(in[0], in[1], in[2], in[3]);
                     return concat({h.sum, h.normed}, 0);
                   }});
  cases.push_back({"add_layer_norm (normed only)", "(4, 5) + (4, 5), weight (5,)",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {4, 5}, "x"), gradcheck_input(rng, {4, 5}, "a"),
                                                gradcheck_input(rng, {5}, "weight")};
                   },
                   [](const std::vector<Tensor>& in) { return add_layer_norm(in[0], in[1], in[2], Tensor()).normed; }});
  cases.push_back({"add_layer_norm (x + x)", "(3, 7) twice, no affine; h and n concatenated",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {3, 7}, "x")}; },
                   [](const std::vector<Tensor>& in) {
                     const ResidualNorm h = add_layer_norm(in[0], in[0], Tensor(), Tensor());
                     return concat({h.sum, h.normed}, 0);
                   }});

  constexpr kernels::NormKind rms = kernels::NormKind::rms;
  cases.push_back({"layer_norm (RMSNorm)", "(2, 3, 6), weight (6,)",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 6}, "x"), gradcheck_input(rng, {6}, "weight")};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), 1e-5, rms); }});
  cases.push_back({"layer_norm (RMSNorm, no affine, offset rows)", "(3, 7) + 5, eps 1e-3",
                   [](Rng& rng) {
                     Tensor x = gradcheck_input(rng, {3, 7}, "x");
                     for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] += 5.0;
                     return std::vector<Tensor>{x};
                   },
                   [](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3, rms); }});
  cases.push_back({"add_layer_norm (RMSNorm)", "(2, 3, 6) + (2, 3, 6), weight (6,); h and n concatenated",
                   [](Rng& rng) {
                     return std::vector<Tensor>{gradcheck_input(rng, {2, 3, 6}, "x"), gradcheck_input(rng, {2, 3, 6}, "a"),
                                                gradcheck_input(rng, {6}, "weight")};
                   },
                   [](const std::vector<Tensor>& in) {
                     const ResidualNorm h = add_layer_norm(in[0], in[1], in[2], Tensor(), 1e-5, rms);
                     return concat({h.sum, h.normed}, 0);
                   }});
}

}  // namespace tf::ops

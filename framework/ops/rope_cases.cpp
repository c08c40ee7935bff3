// Gradient-check cases for rope: default positions, an offset with linear position scaling, YaRN and
// NTK-aware scaling, D = 2; rope_heads on a fused (B, T, (H + 2G) D) row.
#include "framework/ops/cases.h"
#include "framework/ops/rope.h"

namespace tf::ops {

void add_rope_cases(std::vector<OpCase>& cases) {
  auto one = [](Shape s) {
    return [s](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, s, "x")}; };
  };
  cases.push_back({"rope", "(2, 2, 5, 6)", one({2, 2, 5, 6}),
                   [](const std::vector<Tensor>& in) { return rope(in[0]); }});
  cases.push_back({"rope (offset 7, x.5, theta 100)", "(1, 3, 4, 4)", one({1, 3, 4, 4}),
                   [](const std::vector<Tensor>& in) {
                     return rope(in[0], {.theta = 100.0, .position_offset = 7, .position_scale = 0.5});
                   }});
  // YaRN at s = 4: every pair's frequency is changed and the rows are scaled by 0.1 ln 4 + 1, which
  // the backward must scale by too (its rotation is no longer orthogonal).
  cases.push_back({"rope (YaRN x4, L 16)", "(1, 2, 5, 8)", one({1, 2, 5, 8}),
                   [](const std::vector<Tensor>& in) {
                     return rope(in[0], {.theta = 100.0, .scaling = {.kind = RopeScalingKind::yarn, .factor = 4.0,
                                                                     .original_context = 16}});
                   }});
  cases.push_back({"rope (NTK x3, offset 2)", "(2, 1, 3, 6)", one({2, 1, 3, 6}),
                   [](const std::vector<Tensor>& in) {
                     return rope(in[0], {.position_offset = 2, .scaling = {.kind = RopeScalingKind::ntk, .factor = 3.0}});
                   }});
  cases.push_back({"rope (D=2, rank 2)", "(3, 2)", one({3, 2}),
                   [](const std::vector<Tensor>& in) { return rope(in[0]); }});
  cases.push_back({"rope_heads (H 2 + G 1 of D 4 rotated, V copied, offset 3)", "(2, 5, (2 + 2 x 1) x 4)",
                   one({2, 5, 16}), [](const std::vector<Tensor>& in) {
                     return rope_heads(in[0], 3, 4, {.position_offset = 3});
                   }});
}

}  // namespace tf::ops

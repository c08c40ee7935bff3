// Rotary position embedding, RoPE (Su et al. 2021, RoFormer, eq. 34): rotates each pair of
// dimensions of a query or key by an angle proportional to its position, so that the score
// <rope(q, m), rope(k, n)> depends on the positions only through m - n.
//
// B = batch, H = heads, T = time, D = head size (even).
//
//   Tensor q = ops::rope(ops::matmul(...));                  // (B, H, T, D), positions 0 .. T-1
//   Tensor k_new = ops::rope(k_step, {.position_offset = t}); // one decoding step at position t
//
// Pairing: the paper's interleaved one. Dimensions (2i, 2i+1), i = 0 .. D/2 - 1, form a pair that
// is rotated by angle pos * theta^(-2i/D):
//   y[2i]   = x[2i] cos(angle) - x[2i+1] sin(angle)
//   y[2i+1] = x[2i] sin(angle) + x[2i+1] cos(angle)
// (GPT-NeoX and Hugging Face's LLaMA pair dimension i with i + D/2 instead; their checkpoints need
// the rows of their q/k projections permuted to match this pairing.)
// The position of row t is pos = (position_offset + t) * position_scale.
//
// Note [rope scaling]
// ~~~~~~~~~~~~~~~~~~~
// A model trained at context L meets, at a longer context L' = s L, angles pos * f_i it never saw
// for the slow pairs (those whose wavelength 2 pi / f_i exceeds L). Every context-extension method
// changes only the table of angles, never the rotation, so each is a rule in rope_frequencies():
//  - linear position interpolation (Chen et al. 2023): f_i' = f_i / s, i.e. positions
//    squeezed back into the trained range (the same as position_scale = 1 / s);
//  - NTK-aware scaling (bloc97 2023, as written up in Peng et al. 2023, section 3): the base raised,
//    theta' = theta * s^(D / (D - 2)), so the fastest pair is untouched and the slowest is
//    interpolated by exactly s;
//  - YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension", section 3: "NTK-by-parts"
//    interpolation plus a temperature): with
//    r_i = L / (2 pi / f_i) the rotations pair i makes over the trained context, and the ramp
//    g(r) = 0 for r < alpha, 1 for r > beta, (r - alpha) / (beta - alpha) between:
//      f_i' = (1 - g(r_i)) f_i / s + g(r_i) f_i
//    (pairs that turn many times extrapolate, pairs that turn less than once interpolate), and the
//    logits are multiplied by 1 / t with sqrt(1 / t) = 0.1 ln s + 1: rope_magnitude() scales the
//    rotated queries and keys by sqrt(1 / t) each. The paper's alpha = 1, beta = 32 (LLaMA).
// With s = 1 every rule gives back the plain table.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/tensor.h"

namespace tf::ops {

enum class RopeScalingKind { none, linear, ntk, yarn };
inline constexpr RopeScalingKind kRopeScalingKinds[] = {RopeScalingKind::none, RopeScalingKind::linear,
                                                        RopeScalingKind::ntk, RopeScalingKind::yarn};
const char* rope_scaling_name(RopeScalingKind kind);

// How the table is stretched to a longer context (Note [rope scaling]).
struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::none;
  double factor = 1.0;            // s >= 1: the new context over the trained one
  int64_t original_context = 0;   // L, the context trained at (YaRN's ramp reads it; > 0 for yarn)
  double alpha = 1.0, beta = 32.0;  // YaRN's ramp, in rotations over L (alpha < beta)

  bool operator==(const RopeScaling&) const = default;
};

struct RopeOptions {
  double theta = 10000.0;        // base of the frequencies (RoFormer; LLaMA 3 uses 500000)
  int64_t position_offset = 0;   // position of row 0, e.g. the length of a cached prefix
  double position_scale = 1.0;   // multiplies positions (linear interpolation by hand), e.g. 0.25
  RopeScaling scaling = {};
};

// The angular frequency of every pair, D / 2 values: theta^(-2i/D) (RoFormer eq. 15) under the
// scaling rule. And the factor on the rotated rows (YaRN's sqrt(1 / t); 1 otherwise).
std::vector<double> rope_frequencies(int64_t head_dim, const RopeOptions& options);
double rope_magnitude(const RopeScaling& scaling);
// Throws tf::Error for a factor below 1, YaRN without original_context or alpha >= beta.
void check_rope_scaling(const RopeScaling& scaling);

// x (B, H, T, D) -- or any (..., T, D) -- with D even; returns the rotated tensor, same shape.
// Backward is the inverse rotation (the rotation is orthogonal).
Tensor rope(const Tensor& x, const RopeOptions& options = {});

// x (B, T, W), the fused QKV projection's output (W = (H + 2G) D): its first rotated_heads heads
// of D columns (the queries' and the keys', H + G) rotated as rope() rotates them after
// split_heads, row t at position t; the columns after them (the values) pass unchanged. The same
// values bit for bit, in one pass and without cutting the heads out (for ops::attention_qkv).
Tensor rope_heads(const Tensor& x, int64_t rotated_heads, int64_t head_dim, const RopeOptions& options = {});

// cos and sin of the angles at position options.position_offset, (D / 2) floats each, from the
// table ops::rope uses: for a fused decoding kernel that rotates one row itself
// (kernels/cpu/decode_step.h). `table` keeps the pointers valid.
struct RopeRow {
  std::shared_ptr<const void> table;
  const float* cos = nullptr;
  const float* sin = nullptr;
};
RopeRow rope_row(int64_t head_dim, const RopeOptions& options);

}  // namespace tf::ops

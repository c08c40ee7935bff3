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
// Every context-extension method changes only the angle table, never the rotation:
//  - linear position interpolation (Chen et al. 2023) multiplies positions: position_scale = L / L'.
//  - NTK-aware scaling raises the base: theta' = theta * s^(D / (D - 2)).
//  - YaRN (Peng et al. 2023) blends interpolated and original frequencies per pair and scales the
//    logits by a temperature: a per-pair frequency function plus a factor on the table.
// So each is a new field in RopeOptions read by the table builder in rope.cpp (rope_frequencies).
#pragma once
#include <cstdint>
#include <memory>

#include "framework/tensor.h"

namespace tf::ops {

struct RopeOptions {
  double theta = 10000.0;        // base of the frequencies (RoFormer; LLaMA 3 uses 500000)
  int64_t position_offset = 0;   // position of row 0, e.g. the length of a cached prefix
  double position_scale = 1.0;   // multiplies positions: linear position interpolation, e.g. 0.25
};

// x (B, H, T, D) -- or any (..., T, D) -- with D even; returns the rotated tensor, same shape.
// Backward is the inverse rotation (the rotation is orthogonal).
Tensor rope(const Tensor& x, const RopeOptions& options = {});

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

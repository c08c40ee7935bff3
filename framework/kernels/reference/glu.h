// Gated linear units for the feed-forward (Dauphin et al. 2017; Shazeer 2020, "GLU Variants Improve
// Transformer"): the first projection produces two halves per row, a gate a and a value b, and
//   y = act(a) * b                   h = [a | b] (R, 2F) -> y (R, F)
// with act the kind's activation (Note [feed-forward kinds]; SwiGLU: SiLU). Backward:
//   da = dy * b * act'(a);   db = dy * act(a)
// Reference kernels (plain loops, float and double, any gated kind) here; kernels/cpu/glu.h has the
// fast float32 SwiGLU.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/feed_forward_kind.h"

namespace tf::kernels {

// y (R, F) from h (R, 2F); kind must be gated.
template <class T>
void glu_forward_reference(FeedForwardKind kind, const T* h, int64_t rows, int64_t width, T* y);
// dh (R, 2F), assigned, from h and dy (R, F).
template <class T>
void glu_backward_reference(FeedForwardKind kind, const T* h, const T* dy, int64_t rows, int64_t width, T* dh);

}  // namespace tf::kernels

// Gated linear units for the feed-forward (Dauphin et al. 2017; Shazeer 2020, "GLU Variants Improve
// Transformer"): the first projection produces two halves per row, a gate a and a value b, and
//   y = act(a) * b                   h = [a | b] (R, 2F) -> y (R, F)
// SwiGLU: act = SiLU(a) = a sigmoid(a) (Swish with beta = 1; Ramachandran et al. 2017).
// Backward, with s = sigmoid(a):
//   da = dy * b * act'(a),  act'(a) = s (1 + a (1 - s));   db = dy * act(a)
// Reference kernels (plain loops, float and double) here; kernels/cpu/glu.h has the fast float32 ones.
#pragma once
#include <cstdint>

namespace tf::kernels {

// The feed-forward's form, a value that travels from the recipe (model.feed_forward) to these kernels:
// the plain MLP with GELU (kernels/reference/activation.h), or a gated one. A new gated kind is a value
// here, its name, and its activation in the reference and fast kernels.
enum class FeedForwardKind { gelu, swiglu };
inline constexpr FeedForwardKind kFeedForwardKinds[] = {FeedForwardKind::gelu, FeedForwardKind::swiglu};
const char* feed_forward_kind_name(FeedForwardKind kind);  // "gelu", "swiglu"
inline bool gated(FeedForwardKind kind) { return kind != FeedForwardKind::gelu; }

// y (R, F) from h (R, 2F); kind must be gated.
template <class T>
void glu_forward_reference(FeedForwardKind kind, const T* h, int64_t rows, int64_t width, T* y);
// dh (R, 2F), assigned, from h and dy (R, F).
template <class T>
void glu_backward_reference(FeedForwardKind kind, const T* h, const T* dy, int64_t rows, int64_t width, T* dh);

}  // namespace tf::kernels

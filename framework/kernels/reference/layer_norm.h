// Reference layer normalisation kernels (Ba, Kiros & Hinton 2016), plain loops on float and double:
// the oracle for kernels/cpu/layer_norm.h and the float64 path.
//
// Shapes: R = rows (every axis of x but the last, flattened), C = channels (the last axis).
//   mean = sum_c x / C,  var = sum_c (x - mean)^2 / C  (biased, as PyTorch),  rstd = 1 / sqrt(var + eps)
//   xhat = (x - mean) rstd,  y = xhat * weight + bias
// Backward, with g = dy * weight (Note [layer norm backward] in layer_norm.cpp):
//   dx = rstd (g - mean_c(g) - xhat mean_c(g xhat)),  dweight += sum_r dy xhat,  dbias += sum_r dy
// dx is assigned; dweight and dbias accumulate (+=), as parameter gradients do (autograd/tape.h).
// weight, bias, dx, dweight, dbias may each be null (no affine part / gradient not wanted).
//
// RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization") is the same computation
// with the mean taken as 0: rstd = 1 / sqrt(sum_c x^2 / C + eps), xhat = x rstd, y = xhat * weight
// (no bias), and in the backward the mean_c(g) term vanishes, since nothing was subtracted:
//   dx = rstd (g - xhat mean_c(g xhat)).
// The kernels save mean = 0 for it, so every formula above holds as written.
#pragma once
#include <cstdint>

namespace tf::kernels {

// Which normalisation; a value that travels from the recipe (model.norm) to the kernels.
enum class NormKind { layer, rms };
inline constexpr NormKind kNormKinds[] = {NormKind::layer, NormKind::rms};
inline const char* norm_kind_name(NormKind k) { return k == NormKind::layer ? "layer" : "rms"; }

// The arguments of every layer norm kernel, by name. With `residual`, the kernel normalises
// h = x + residual and writes h to `sum` (the pre-LN block's residual add fused with the next
// norm, ops::add_layer_norm); its backward then adds `dsum`, h's own gradient, to dx.
template <class T>
struct LayerNormForwardArgs {
  int64_t rows = 0;            // R, e.g. 2048
  int64_t channels = 0;        // C, e.g. 128
  double eps = 1e-5;
  NormKind kind = NormKind::layer;
  const T* x = nullptr;        // (R, C)
  const T* residual = nullptr; // (R, C) or null
  const T* weight = nullptr;   // (C) or null
  const T* bias = nullptr;     // (C) or null
  T* sum = nullptr;            // (R, C) = x + residual; with residual only
  T* y = nullptr;              // (R, C)
  T* mean = nullptr;           // (R), saved for the backward
  T* rstd = nullptr;           // (R), saved for the backward
};

template <class T>
struct LayerNormBackwardArgs {
  int64_t rows = 0;
  int64_t channels = 0;
  NormKind kind = NormKind::layer;
  const T* dy = nullptr;       // (R, C)
  const T* dsum = nullptr;     // (R, C) gradient reaching h = x + residual directly, or null
  const T* x = nullptr;        // (R, C) the normalised input (h for add_layer_norm)
  const T* weight = nullptr;   // (C) or null
  const T* mean = nullptr;     // (R) from the forward
  const T* rstd = nullptr;     // (R)
  T* dx = nullptr;             // (R, C) assigned, or null
  T* dweight = nullptr;        // (C) accumulated, or null
  T* dbias = nullptr;          // (C) accumulated, or null
};

template <class T>
void layer_norm_forward_reference(const LayerNormForwardArgs<T>& a);
template <class T>
void layer_norm_backward_reference(const LayerNormBackwardArgs<T>& a);

}  // namespace tf::kernels

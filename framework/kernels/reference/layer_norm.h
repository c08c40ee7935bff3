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
#pragma once
#include <cstdint>

namespace tf::kernels {

// x, y: (R, C); weight, bias: (C); mean, rstd: (R) outputs, saved for the backward.
template <class T>
void layer_norm_forward_reference(const T* x, const T* weight, const T* bias, int64_t rows, int64_t channels,
                                  double eps, T* y, T* mean, T* rstd);

// dy, x, dx: (R, C); weight, dweight, dbias: (C); mean, rstd: (R) from the forward.
template <class T>
void layer_norm_backward_reference(const T* dy, const T* x, const T* weight, const T* mean, const T* rstd,
                                   int64_t rows, int64_t channels, T* dx, T* dweight, T* dbias);

}  // namespace tf::kernels

// Activation functions: GELU (tanh or erf form), GELU with a bias added first (fused), ReLU, and
// the gated linear units of gated feed-forwards (SwiGLU).
//
//   Tensor h = ops::gelu(ops::linear(x, w1, b1));                 // (B, T, d_ff)
//   Tensor h = ops::bias_gelu(ops::linear(x, w1), b1);            // the same, bias add fused
//   Tensor e = ops::gelu(x, ops::GeluApprox::erf);                // exact form, as BERT
#pragma once
#include "framework/kernels/reference/activation.h"
#include "framework/kernels/reference/glu.h"
#include "framework/tensor.h"

namespace tf::ops {

// tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); erf: 0.5 x (1 + erf(x / sqrt 2))
// (Hendrycks & Gimpel 2016). The enum lives with the kernels, which need it too.
using GeluApprox = kernels::GeluApprox;

Tensor gelu(const Tensor& x, GeluApprox approx = GeluApprox::tanh);

// gelu(x + bias), bias (C) broadcast over the last axis of x (..., C). Fused so the pre-activation
// x + bias is neither written in the forward nor saved for the backward (it is recomputed there).
// Measured against ops::gelu(ops::add(x, bias)), f32 (8192, 512), 1 thread, best of 7 on a shared
// AVX machine: forward 8.6 vs 15.6 ms (tanh), 9.4 vs 15.7 ms (erf); forward + backward 49 vs 57 ms
// (tanh), 36 vs 51 ms (erf). For scale, the float32 reference kernel's forward takes 236 ms (tanh).
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApprox approx = GeluApprox::tanh);

// The gradient with respect to x (the pre-activation x + bias when bias is defined) of
// gelu(x + bias), given dy, the gradient of its output. Not recorded: for backward functions that
// recompute a GELU rather than store it (ops::gelu_linear).
Tensor gelu_backward(const Tensor& x, const Tensor& bias, const Tensor& dy, GeluApprox approx);

// max(x, 0); the gradient at exactly 0 is 0 (as PyTorch).
Tensor relu(const Tensor& x);

// A gated linear unit of a gated feed-forward kind (kernels/reference/glu.h; SwiGLU: Shazeer 2020):
// h (..., 2F) = [gate a | value b] -> act(a) * b (..., F). Saves h; the backward recomputes act(a).
//   Tensor y = ops::glu(fc.forward(x), kernels::FeedForwardKind::swiglu);   // (B, T, F)
using FeedForwardKind = kernels::FeedForwardKind;
Tensor glu(const Tensor& h, FeedForwardKind kind);

// The activation of an ungated feed-forward kind other than GELU (Note [feed-forward kinds]),
// elementwise, forward and backward from its row: act(x), and dy * act'(x) from the saved x.
//   Tensor h = ops::feed_forward_activation(fc.forward(x), kind);   // (B, T, F)
Tensor feed_forward_activation(const Tensor& x, FeedForwardKind kind);

}  // namespace tf::ops

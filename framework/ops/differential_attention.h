// Differential attention (Ye et al. 2024, "Differential Transformer", eq. 1-3): two softmax maps
// from two halves of each query and key, subtracted, so that attention both maps give to the same
// irrelevant keys (the "noise") cancels:
//   DiffAttn(X) = (softmax(Q1 K1^T / sqrt(D)) - lambda softmax(Q2 K2^T / sqrt(D))) V
//
// B = batch, H = differential heads, G = their key/value heads, T = time, D = query/key size of one
// map, Dv = value size (2D in the paper: one differential head takes the place of two softmax heads).
//
//   Tensor lambda = ops::differential_lambda(lq1, lk1, lq2, lk2, 0.8);       // scalar, eq. 2
//   Tensor o = ops::differential_attention(q1, k1, q2, k2, v, lambda, {.causal = true});  // (B, H, T, Dv)
//
// Note [differential attention]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// lambda is re-parameterised (eq. 2) so that its learning follows that of the other weights:
//   lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init
// with four learned D-vectors per layer, shared by its heads, and lambda_init = 0.8 - 0.6
// exp(-0.3 (l - 1)) for layer l = 1 .. L (a constant). Its gradient, with g = dL/dlambda:
//   d lambda_q1 = g exp(lambda_q1 . lambda_k1) lambda_k1,   d lambda_k1 = g exp(...) lambda_q1,
//   d lambda_q2 = -g exp(lambda_q2 . lambda_k2) lambda_k2,  d lambda_k2 = -g exp(...) lambda_q2.
// The two maps share V, so (A1 - lambda A2) V = A1 V - lambda A2 V: the op is two calls of the fused
// (flash) attention op and a scaled difference, and never forms a (T, T) map. Its backward is theirs
// (the tape records attention, attention, mul, sub). The layer around it (layers/attention.h) then
// normalises each head (RMSNorm over Dv) and scales it by 1 - lambda_init (eq. 3).
#pragma once
#include "framework/ops/attention.h"
#include "framework/ops/attention_cache.h"

namespace tf::ops {

// lambda_q1, lambda_k1, lambda_q2, lambda_k2: (D) each. Returns the scalar lambda (shape ()).
Tensor differential_lambda(const Tensor& lambda_q1, const Tensor& lambda_k1, const Tensor& lambda_q2,
                           const Tensor& lambda_k2, double lambda_init);

// q1, q2 (B, H, T_q, D); k1, k2 (B, G, T_k, D); v (B, G, T_k, Dv); lambda a scalar. Returns
// (B, H, T_q, Dv). Masks, windows and ALiBi as ops::attention's options say, applied to both maps.
// Not supported: dropout and T5's bias table (options.relative_bias). weights_out, if given, receives
// A1 - lambda A2 (B, H, T_q, T_k), for inspection (not recorded).
Tensor differential_attention(const Tensor& q1, const Tensor& k1, const Tensor& q2, const Tensor& k2, const Tensor& v,
                              const Tensor& lambda, const AttentionOptions& options = {},
                              Tensor* weights_out = nullptr);

// Decoding (inference only): appends the new positions' keys and values to the cache (keys of the
// first map in cache.keys, of the second in cache.second_keys, values once in cache.values, (B, G, L, Dv))
// and returns their outputs (B, H, T, Dv), the rows a causal differential_attention over the whole
// context gives them (ops::attention_append, twice).
Tensor differential_attention_append(const Tensor& q1, const Tensor& k1, const Tensor& q2, const Tensor& k2,
                                     const Tensor& v, const Tensor& lambda, const KvBuffers& cache,
                                     const kernels::AttentionVariant& variant = {});

}  // namespace tf::ops

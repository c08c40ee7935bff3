// The selective scan of Mamba (Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective
// State Spaces", Algorithm 2): a diagonal linear recurrence per channel whose step size Delta and
// input/output maps B and C depend on the input, discretised by zero-order hold for A and Euler for B
// (section 3.5.2, as the paper's code does).
//
// B = batch, T = time, E = channels (d_inner), N = state size per channel.
//
//   Tensor y = ops::selective_scan(x, delta, a, b, c, d);   // (B, T, E)
//
// Note [selective scan]
// ~~~~~~~~~~~~~~~~~~~~~
// For each batch entry and channel e, with h_{-1} = 0 (N):
//   abar_t = exp(delta_t A[e])                      (N)   zero-order hold of the diagonal A
//   h_t    = abar_t * h_{t-1} + delta_t B_t x_t     (N)   B_t, C_t (N) shared by every channel
//   y_t    = C_t . h_t + D[e] x_t
// The cost is O(T E N) and the state O(E N) per sequence, whatever T. Backward (g = dy_t; gh the
// gradient reaching h_t, gathered from t = T - 1 down):
//   gh     = g C_t + abar_{t+1} * gh_{t+1}
//   dC_t  += g h_t                  dD[e] += g x_t
//   dB_t  += gh delta_t x_t         dx_t   = g D[e] + delta_t (gh . B_t)
//   ddelta_t = sum_n gh_n (h_{t-1,n} abar_{t,n} A[e,n] + B_{t,n} x_t)
//   dA[e]   += gh * h_{t-1} * abar_t * delta_t
// The backward runs the forward again for a block of channels, keeping its h_t (T x block x N, a
// few MiB at most: the block shrinks as T grows), then walks back; blocks and batch entries run in
// parallel, each writing its own share of dB, dC, dA and dD, summed afterwards in a fixed order,
// so the result does not depend on the number of threads.
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

// x, delta (B, T, E); a (E, N), the negative real diagonal of A; b, c (B, T, N); d (E) or undefined
// (no skip). Returns (B, T, E).
Tensor selective_scan(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                      const Tensor& d);

// Decoding (inference only): the scan of the new positions from `state` (B, E, N), the h of the
// position before them (zeros at the start); returns their outputs, the rows a scan over the whole
// sequence gives them, and leaves their last h in `state`.
Tensor selective_scan_append(const Tensor& x, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                             const Tensor& d, const Tensor& state);

}  // namespace tf::ops

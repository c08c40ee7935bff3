// A selective state-space mixer: the Mamba block of Gu & Dao 2023 ("Mamba: Linear-Time Sequence
// Modeling with Selective State Spaces", section 3.4 and figure 3), used as the sequence mixer of a
// transformer block (`model.mixer: mamba`), so a hybrid interleaves it with attention as Jamba does
// (Lieber et al. 2024) and every layer keeps its feed-forward.
//
// B = batch, T = time, C = d_model, E = expand C (d_inner), N = state size, K = conv taps,
// R = ceil(C / 16) (the rank of Delta's projection).
//
//   x, z = split(in_proj(u))                 (B, T, E) each; in_proj.weight (2E, C), no bias
//   x = SiLU(causal_conv1d(x))               depthwise over time, conv.weight (E, 1, K), conv.bias (E)
//   dt, B, C = split(x_proj(x))              (B, T, R), (B, T, N), (B, T, N); x_proj.weight (R + 2N, E)
//   delta = softplus(dt_proj(dt))            (B, T, E); dt_proj.weight (E, R), dt_proj.bias (E)
//   A = -exp(A_log)                          (E, N), A_log starts at log(1 .. N) (S4D-real)
//   y = selective_scan(x, delta, A, B, C, D) (B, T, E); D (E) starts at ones (framework/ops/selective_scan.h)
//   out = out_proj(y * SiLU(z))              (B, T, C); out_proj.weight (C, E), no bias
//
// Initialisation as the paper's code: dt_proj.weight ~ U(-R^-1/2, R^-1/2); dt_proj.bias =
// softplus^-1(dt) with dt = exp(U(log 0.001, log 0.1)), at least 1e-4, so Delta starts in [0.001, 0.1];
// conv ~ U(-K^-1/2, K^-1/2) (PyTorch's Conv1d default); in_proj and x_proj ~ N(0, init_std), out_proj
// ~ N(0, residual std) like every residual projection here.
//
// Decoding carries, per layer, the last K - 1 inputs of the convolution (B, K - 1, E) and the scan's
// state (B, E, N): O(E (K + N)) per token, whatever the context. Causal only (no BERT).
#pragma once
#include "framework/ops/attention_cache.h"
#include "layers/linear.h"

namespace tf::layers {

struct Mamba {
  struct Options {
    int64_t d_model = 64;
    int64_t expand = 2;   // E = expand d_model
    int64_t state = 16;   // N
    int64_t conv = 4;     // K
    double init_std = 0.02;
    double out_init_std = 0.02;  // the residual projection's
  };
  Options options;
  Linear in_proj, x_proj, dt_proj, out_proj;
  Tensor conv_weight;  // (E, 1, K), PyTorch's Conv1d layout
  Tensor conv_bias;    // (E)
  Tensor A_log;        // (E, N)
  Tensor D;            // (E)

  Mamba() = default;
  Mamba(const Options& options, Init& init);
  int64_t inner() const { return options.expand * options.d_model; }  // E
  int64_t dt_rank() const { return (options.d_model + 15) / 16; }     // R = ceil(C / 16)
  // u (B, T, C) -> (B, T, C). With `cache` (decoding), u holds the new positions and the layer's
  // conv_state and state carry everything before them.
  Tensor forward(const Tensor& u, const ops::KvBuffers* cache = nullptr) const;
  void parameters(ParamList& out, const std::string& prefix) const;
  // The decode state shapes for a batch of B: conv (B, K - 1, E) and scan (B, E, N).
  Shape conv_state_shape(int64_t batch) const { return {batch, options.conv - 1, inner()}; }
  Shape scan_state_shape(int64_t batch) const { return {batch, inner(), options.state}; }
};

}  // namespace tf::layers

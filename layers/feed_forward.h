// Position-wise feed-forward network: d_model -> d_ff -> d_model with GELU between
// (Vaswani et al. 2017, eq. 2, with GELU as in GPT-2 and BERT), another activation, or a gated one
// (SwiGLU, Shazeer 2020): fc makes a gate and a value of width d_ff each, and act(gate) * value goes
// into proj. The kinds: Note [feed-forward kinds] (framework/kernels/reference/feed_forward_kind.h).
#pragma once
#include "framework/ops/activation.h"
#include "layers/linear.h"

namespace tf::layers {

struct FeedForward {
  struct Options {
    int64_t d_model = 64;
    int64_t d_ff = 0;  // 0 means 4 * d_model
    ops::GeluApprox gelu = ops::GeluApprox::tanh;
    kernels::FeedForwardKind kind = kernels::FeedForwardKind::gelu;  // Note [feed-forward kinds]
    bool bias = true;
    double init_std = 0.02;
    double proj_init_std = 0.02;  // GPT-2 scales the residual projection: 0.02 / sqrt(2 n_layers)
  };
  Linear fc;    // "fc":   (d_ff, d_model); gated: (2 d_ff, d_model), rows [gate | value]
  Linear proj;  // "proj": (d_model, d_ff)
  ops::GeluApprox gelu = ops::GeluApprox::tanh;
  kernels::FeedForwardKind kind = kernels::FeedForwardKind::gelu;

  FeedForward() = default;
  FeedForward(const Options& options, Init& init);
  Tensor forward(const Tensor& x) const;  // (B, T, d_model) -> (B, T, d_model)
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers

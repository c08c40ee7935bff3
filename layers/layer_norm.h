// Normalisation over the last axis with a learned scale: layer norm with a learned shift (Ba et al.
// 2016), or RMSNorm, which neither centres nor shifts (Zhang & Sennrich 2019); the math of both is in
// framework/kernels/reference/layer_norm.h.
#pragma once
#include "framework/ops/layer_norm.h"  // (and NormKind, from its kernels)
#include "layers/module.h"

namespace tf::layers {

struct LayerNorm {
  struct Options {
    int64_t dim = 64;   // d_model
    double eps = 1e-5;  // added to the variance, as in PyTorch's nn.LayerNorm
    kernels::NormKind kind = kernels::NormKind::layer;
  };
  Tensor weight;  // (dim), starts at ones
  Tensor bias;    // (dim), starts at zeros; undefined for RMSNorm
  double eps = 1e-5;
  kernels::NormKind kind = kernels::NormKind::layer;

  LayerNorm() = default;
  LayerNorm(const Options& options, Init& init);
  Tensor forward(const Tensor& x) const;  // (..., dim) -> (..., dim)
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers

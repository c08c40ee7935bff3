// Layer normalisation over the last axis with a learned scale and shift (Ba et al. 2016).
#pragma once
#include "layers/module.h"

namespace tf::layers {

struct LayerNorm {
  struct Options {
    int64_t dim = 64;   // d_model
    double eps = 1e-5;  // added to the variance, as in PyTorch's nn.LayerNorm
  };
  Tensor weight;  // (dim), starts at ones
  Tensor bias;    // (dim), starts at zeros
  double eps = 1e-5;

  LayerNorm() = default;
  LayerNorm(const Options& options, Init& init);
  Tensor forward(const Tensor& x) const;  // (..., dim) -> (..., dim)
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers

// Linear layer: y = x W^T + b, with PyTorch's weight layout (out_features, in_features).
#pragma once
#include "layers/module.h"

namespace tf::layers {

struct Linear {
  struct Options {
    int64_t in = 64;    // input features
    int64_t out = 64;   // output features
    bool bias = true;
    double init_std = 0.02;  // weights ~ normal(0, init_std); biases start at zero
  };
  Tensor weight;  // (out, in)
  Tensor bias;    // (out), or undefined

  Linear() = default;
  Linear(const Options& options, Init& init);
  Tensor forward(const Tensor& x) const;  // (..., in) -> (..., out)
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers

// Embedding table: row i is the vector of token (or position, or segment) i.
#pragma once
#include "layers/module.h"

namespace tf::layers {

struct Embedding {
  struct Options {
    int64_t count = 256;  // rows: vocabulary size, positions or segments
    int64_t dim = 64;     // d_model
    double init_std = 0.02;
  };
  Tensor weight;  // (count, dim)

  Embedding() = default;
  Embedding(const Options& options, Init& init);
  Tensor forward(const Tensor& ids) const;  // ids: i32 (...) -> (..., dim)
  void parameters(ParamList& out, const std::string& prefix) const;
};

}  // namespace tf::layers

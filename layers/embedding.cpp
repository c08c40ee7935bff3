// Embedding layer.
#include "layers/embedding.h"

#include "framework/ops/embedding.h"

namespace tf::layers {

Embedding::Embedding(const Options& o, Init& init) : weight(init.normal({o.count, o.dim}, o.init_std)) {}

Tensor Embedding::forward(const Tensor& ids) const { return ops::embedding(weight, ids); }

void Embedding::parameters(ParamList& out, const std::string& prefix) const {
  add_param(out, prefix + "weight", weight, ParamKind::embedding);
}

}  // namespace tf::layers

// LayerNorm layer.
#include "layers/layer_norm.h"

#include "framework/ops/layer_norm.h"

namespace tf::layers {

LayerNorm::LayerNorm(const Options& o, Init& init)
    : weight(init.ones({o.dim})), bias(init.zeros({o.dim})), eps(o.eps) {}

Tensor LayerNorm::forward(const Tensor& x) const { return ops::layer_norm(x, weight, bias, eps); }

void LayerNorm::parameters(ParamList& out, const std::string& prefix) const {
  add_param(out, prefix + "weight", weight, ParamKind::norm);
  add_param(out, prefix + "bias", bias, ParamKind::norm);
}

}  // namespace tf::layers

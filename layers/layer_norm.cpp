// LayerNorm layer (layer norm or RMSNorm).
#include "layers/layer_norm.h"

#include "framework/ops/layer_norm.h"

namespace tf::layers {

LayerNorm::LayerNorm(const Options& o, Init& init)
    : weight(init.ones({o.dim})),
      bias(o.kind == kernels::NormKind::layer ? init.zeros({o.dim}) : Tensor()),
      eps(o.eps),
      kind(o.kind) {}

Tensor LayerNorm::forward(const Tensor& x) const { return ops::layer_norm(x, weight, bias, eps, kind); }

void LayerNorm::parameters(ParamList& out, const std::string& prefix) const {
  add_param(out, prefix + "weight", weight, ParamKind::norm);
  if (bias.defined()) add_param(out, prefix + "bias", bias, ParamKind::norm);
}

}  // namespace tf::layers

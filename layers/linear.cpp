// Linear layer.
#include "layers/linear.h"

#include "framework/ops/matmul.h"

namespace tf::layers {

Linear::Linear(const Options& o, Init& init) : weight(init.normal({o.out, o.in}, o.init_std)) {
  if (o.bias) bias = init.zeros({o.out});
}

Tensor Linear::forward(const Tensor& x) const { return ops::linear(x, weight, bias); }

void Linear::parameters(ParamList& out, const std::string& prefix) const {
  add_param(out, prefix + "weight", weight, ParamKind::weight);
  add_param(out, prefix + "bias", bias, ParamKind::bias);
}

}  // namespace tf::layers

// Feed-forward layer.
#include "layers/feed_forward.h"

#include "framework/ops/decode_step.h"
#include "framework/ops/matmul.h"

namespace tf::layers {

FeedForward::FeedForward(const Options& o, Init& init) : gelu(o.gelu), kind(o.kind) {
  const int64_t d_ff = o.d_ff > 0 ? o.d_ff : 4 * o.d_model;
  fc = Linear({o.d_model, kernels::gated(kind) ? 2 * d_ff : d_ff, o.bias, o.init_std}, init);
  proj = Linear({d_ff, o.d_model, o.bias, o.proj_init_std}, init);
}

// proj(gelu(fc(x))), with GELU fused into proj (ops::gelu_linear): its output, 4 C floats per
// token, is recomputed in the backward instead of kept from the forward to the backward.
// Gated: proj(glu(fc(x))). One row without gradients (a decoding step): ops::gelu_mlp_step.
Tensor FeedForward::forward(const Tensor& x) const {
  if (kind == kernels::FeedForwardKind::gelu && ops::one_token_step(x))  // decoding: the whole MLP in one parallel region
    return ops::gelu_mlp_step(x, {fc.weight, fc.bias, proj.weight, proj.bias}, gelu);
  const Tensor pre_activation = in_layer("fc", [&] { return fc.forward(x); });
  if (kernels::gated(kind)) return in_layer("proj", [&] { return proj.forward(ops::glu(pre_activation, kind)); });
  if (kind != kernels::FeedForwardKind::gelu)  // Note [feed-forward kinds]
    return in_layer("proj", [&] { return proj.forward(ops::feed_forward_activation(pre_activation, kind)); });
  return in_layer("proj", [&] { return ops::gelu_linear(pre_activation, proj.weight, proj.bias, gelu); });
}

void FeedForward::parameters(ParamList& out, const std::string& prefix) const {
  fc.parameters(out, prefix + "fc.");
  proj.parameters(out, prefix + "proj.");
}

}  // namespace tf::layers

// Feed-forward layer.
#include "layers/feed_forward.h"

namespace tf::layers {

FeedForward::FeedForward(const Options& o, Init& init) : gelu(o.gelu) {
  const int64_t d_ff = o.d_ff > 0 ? o.d_ff : 4 * o.d_model;
  fc = Linear({o.d_model, d_ff, o.bias, o.init_std}, init);
  proj = Linear({d_ff, o.d_model, o.bias, o.proj_init_std}, init);
}

Tensor FeedForward::forward(const Tensor& x) const {
  const Tensor hidden = in_layer("fc", [&] { return ops::gelu(fc.forward(x), gelu); });
  return in_layer("proj", [&] { return proj.forward(hidden); });
}

void FeedForward::parameters(ParamList& out, const std::string& prefix) const {
  fc.parameters(out, prefix + "fc.");
  proj.parameters(out, prefix + "proj.");
}

}  // namespace tf::layers

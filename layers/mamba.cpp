// The Mamba mixer; the math and the initialisation are in mamba.h.
#include "layers/mamba.h"

#include <cmath>

#include "framework/ops/causal_conv.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/pointwise.h"
#include "framework/ops/selective_scan.h"
#include "framework/ops/shape.h"

namespace tf::layers {

Mamba::Mamba(const Options& o, Init& init) : options(o) {
  TF_CHECK_INPUT(o.d_model > 0 && o.expand > 0 && o.state > 0 && o.conv > 0,
                 "mamba: d_model, expand, state and conv must be positive, got ", o.d_model, ", ", o.expand, ", ",
                 o.state, ", ", o.conv);
  const int64_t E = inner(), N = o.state, K = o.conv, R = dt_rank();
  in_proj = Linear({o.d_model, 2 * E, false, o.init_std}, init);
  const double conv_bound = 1.0 / std::sqrt(static_cast<double>(K));
  conv_weight = init.uniform({E, 1, K}, -conv_bound, conv_bound);
  conv_bias = init.uniform({E}, -conv_bound, conv_bound);
  x_proj = Linear({E, R + 2 * N, false, o.init_std}, init);
  const double dt_bound = 1.0 / std::sqrt(static_cast<double>(R));
  dt_proj.weight = init.uniform({E, R}, -dt_bound, dt_bound);
  // softplus(bias) = dt, log-uniform in [0.001, 0.1]: softplus^-1(dt) = dt + log(1 - exp(-dt)).
  dt_proj.bias = init.from_values({E}, [&init](int64_t) {
    const double dt = std::max(1e-4, std::exp(std::log(1e-3) + init.rng.uniform() * (std::log(0.1) - std::log(1e-3))));
    return dt + std::log(-std::expm1(-dt));
  });
  A_log = init.from_values({E, N}, [N](int64_t i) { return std::log(static_cast<double>(i % N + 1)); });
  D = init.ones({E});
  out_proj = Linear({E, o.d_model, false, o.out_init_std}, init);
}

Tensor Mamba::forward(const Tensor& u, const ops::KvBuffers* cache) const {
  const int64_t E = inner(), N = options.state, K = options.conv, R = dt_rank();
  const auto xz = ops::split(in_layer("in_proj", [&] { return in_proj.forward(u); }), {E, E}, -1);
  const Tensor taps = ops::reshape(conv_weight, {E, K});
  const Tensor conv = cache ? ops::causal_conv1d_append(xz[0], taps, conv_bias, cache->conv_state)
                            : ops::causal_conv1d(xz[0], taps, conv_bias);
  const Tensor x = ops::silu(conv);  // (B, T, E)
  const auto dbc = ops::split(in_layer("x_proj", [&] { return x_proj.forward(x); }), {R, N, N}, -1);
  const Tensor delta = ops::softplus(in_layer("dt_proj", [&] { return dt_proj.forward(dbc[0]); }));  // (B, T, E)
  const Tensor a = ops::neg(ops::exp(A_log));  // (E, N)
  const Tensor y = cache ? ops::selective_scan_append(x, delta, a, dbc[1], dbc[2], D, cache->state)
                         : ops::selective_scan(x, delta, a, dbc[1], dbc[2], D);
  const Tensor gated = ops::mul(y, ops::silu(xz[1]));
  return in_layer("out_proj", [&] { return out_proj.forward(gated); });
}

void Mamba::parameters(ParamList& out, const std::string& prefix) const {
  in_proj.parameters(out, prefix + "in_proj.");
  add_param(out, prefix + "conv1d.weight", conv_weight, ParamKind::weight);
  add_param(out, prefix + "conv1d.bias", conv_bias, ParamKind::bias);
  x_proj.parameters(out, prefix + "x_proj.");
  dt_proj.parameters(out, prefix + "dt_proj.");
  add_param(out, prefix + "A_log", A_log, ParamKind::norm);  // no weight decay, as the paper's code
  add_param(out, prefix + "D", D, ParamKind::norm);
  out_proj.parameters(out, prefix + "out_proj.");
}

}  // namespace tf::layers

// Transformer block (pre-LN or post-LN); see block.h.
#include "layers/block.h"

#include "framework/ops/elementwise.h"
#include "framework/ops/layer_norm.h"

namespace tf::layers {

TransformerBlock::TransformerBlock(const Options& o, Init& init)
    : options(o),
      ln_1({o.attn.d_model, o.ln_eps, o.norm}, init),
      ln_2({o.attn.d_model, o.ln_eps, o.norm}, init),
      attn(o.attn.mixer == MixerKind::mamba ? MultiHeadAttention() : MultiHeadAttention(o.attn, init)),
      mamba(o.attn.mixer == MixerKind::mamba ? Mamba(o.mamba, init) : Mamba()),
      mlp(o.mlp, init) {}

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                                 const ops::KvBuffers* cache) const {
  const double p = options.dropout;
  auto attention = [&](const Tensor& in) {
    if (options.attn.mixer == MixerKind::mamba) return in_layer("mamba", [&] { return mamba.forward(in, cache); });
    return in_layer("attn", [&] { return attn.forward(in, key_padding, ctx, cache); });
  };
  auto feed_forward = [&](const Tensor& in) { return in_layer("mlp", [&] { return mlp.forward(in); }); };
  auto norm_1 = [&](const Tensor& in) { return in_layer("ln_1", [&] { return ln_1.forward(in); }); };
  auto norm_2 = [&](const Tensor& in) { return in_layer("ln_2", [&] { return ln_2.forward(in); }); };
  if (options.pre_norm) {
    // h = x + attention branch and ln_2(h) in one op (ops::add_layer_norm).
    const Tensor branch = dropout(attention(norm_1(x)), p, ctx);
    ops::ResidualNorm h = [&] {
      LayerScope scope("ln_2");
      return ops::add_layer_norm(x, branch, ln_2.weight, ln_2.bias, ln_2.eps, ln_2.kind);
    }();
    return ops::add(h.sum, dropout(feed_forward(h.normed), p, ctx));
  }
  Tensor h = norm_1(ops::add(x, dropout(attention(x), p, ctx)));
  return norm_2(ops::add(h, dropout(feed_forward(h), p, ctx)));
}

void TransformerBlock::parameters(ParamList& out, const std::string& prefix) const {
  ln_1.parameters(out, prefix + "ln_1.");
  if (options.attn.mixer == MixerKind::mamba) mamba.parameters(out, prefix + "mamba.");
  else attn.parameters(out, prefix + "attn.");
  ln_2.parameters(out, prefix + "ln_2.");
  mlp.parameters(out, prefix + "mlp.");
}

}  // namespace tf::layers

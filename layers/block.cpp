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

// Note [recomputed blocks]: activation recomputation (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost", section 3; PyTorch's torch.utils.checkpoint). Training keeps what every
// op's backward reads until backward reaches it: per block some 10-20 tensors of (B, T, C) or
// (B, T, d_ff), plus attention's. With ctx.recompute a block runs once without recording, keeping
// only its input x (its output is the next block's x), and one node stands for it on the tape.
// Its backward runs the block again, recorded onto a replay tape (tf::ReplayScope), and
// backpropagates the gradient it received through that: the block's activations live only while
// backward is inside it. Memory for L blocks goes from L blocks' activations to L inputs plus one
// block's activations; time grows by one forward pass (measured: a step takes ~1.25 times as long).
//
// The second run computes the same numbers as the first: dropout draws from a copy of the
// generator as it was when the block first ran, and every kernel is deterministic for a given
// thread count (sequence parallel: the ranks run it again together, in the same order, so ring
// attention's messages pair up as before). Training with and without recomputation therefore
// gives the same bits. The node holds a copy of the block, so handles on its parameters: their
// gradients are not final (train/grad_sync.h, Note [final gradients]) until it has run.
struct RecomputedBlockNode : Node {
  TransformerBlock block;  // the same parameters (copies of the handles)
  Tensor x, key_padding;   // (B, T, C); (B, T) or undefined
  Context ctx;
  Rng dropout_rng;         // *ctx.rng before the block's first run
  const char* op_name() const override { return "recomputed_block"; }
  void backward() override {
    const Tensor dy = take_output_grad();
    Context again = ctx;
    again.rng = ctx.rng ? &dropout_rng : nullptr;
    again.recompute = false;
    again.attention_weights = nullptr;  // the first run appended them
    ReplayScope replay;
    const Tensor y = block.forward_sublayers(x, key_padding, again, nullptr);
    replay.backward(y, dy);
  }
};

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& key_padding, const Context& ctx,
                                 const ops::KvBuffers* cache) const {
  if (!ctx.recompute || cache || !grad_enabled()) return forward_sublayers(x, key_padding, ctx, cache);
  auto node = std::make_unique<RecomputedBlockNode>();
  node->block = *this;
  node->x = x;
  node->key_padding = key_padding;
  node->ctx = ctx;
  if (ctx.rng) node->dropout_rng = *ctx.rng;
  Tensor y = [&] {
    NoGradGuard no_grad;
    return forward_sublayers(x, key_padding, ctx, nullptr);
  }();
  record(std::move(node), {y});
  return y;
}

Tensor TransformerBlock::forward_sublayers(const Tensor& x, const Tensor& key_padding, const Context& ctx,
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

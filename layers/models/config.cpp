// ModelConfig -> block options, and consistency checks.
#include "layers/models/config.h"

#include <cmath>

namespace tf::layers {

TransformerBlock::Options ModelConfig::block_options() const {
  TransformerBlock::Options b;
  const double residual_std = init_std / std::sqrt(2.0 * n_layers);
  b.attn.d_model = d_model;
  b.attn.n_heads = n_heads;
  b.attn.n_kv_heads = kv_heads();
  b.attn.causal = causal;
  b.attn.bias = bias;
  b.attn.rope = position == PositionEncoding::rope;
  b.attn.rope_options.theta = rope_theta;
  b.attn.variant = attention;
  b.attn.variant.alibi = position == PositionEncoding::alibi;
  b.attn.attn_dropout = attn_dropout;
  b.attn.init_std = init_std;
  b.attn.proj_init_std = residual_std;
  b.mlp.d_model = d_model;
  b.mlp.d_ff = ff_width();
  b.mlp.gelu = gelu;
  b.mlp.kind = feed_forward;
  b.mlp.bias = bias;
  b.mlp.init_std = init_std;
  b.mlp.proj_init_std = residual_std;
  b.pre_norm = pre_norm;
  b.ln_eps = ln_eps;
  b.norm = norm;
  b.dropout = dropout;
  return b;
}

void ModelConfig::validate() const {
  TF_CHECK_CONFIG(vocab_size > 0, ({"model.vocab_size"}), "model.vocab_size must be positive, got ", vocab_size);
  TF_CHECK_CONFIG(max_seq_len > 0, ({"model.max_seq_len"}), "model.max_seq_len must be positive, got ", max_seq_len);
  TF_CHECK_CONFIG(d_model > 0 && n_layers > 0 && n_heads > 0, ({"model.d_model", "model.n_layers", "model.n_heads"}),
                  "model.d_model, n_layers and n_heads must be positive");
  TF_CHECK_CONFIG(d_model % n_heads == 0, ({"model.d_model", "model.n_heads"}), "model.d_model (", d_model,
                  ") must be divisible by model.n_heads (", n_heads, ")");
  TF_CHECK_CONFIG(n_kv_heads >= 0 && (n_kv_heads == 0 || n_heads % n_kv_heads == 0),
                  ({"model.n_heads", "model.n_kv_heads"}), "model.n_heads (", n_heads,
                  ") must be a multiple of model.n_kv_heads (", n_kv_heads, ")");
  TF_CHECK_CONFIG(position != PositionEncoding::rope || head_dim() % 2 == 0,
                  ({"model.position", "model.d_model", "model.n_heads"}),
                  "model.position rope needs an even head_dim, got d_model / n_heads = ", head_dim());
  TF_CHECK_CONFIG(attention.window >= 0, ({"model.attention_window"}),
                  "model.attention_window must be >= 0 (0 means no window), got ", attention.window);
  TF_CHECK_CONFIG(dropout >= 0 && dropout < 1, ({"model.dropout"}), "model.dropout must be in [0, 1), got ", dropout);
  TF_CHECK_CONFIG(attn_dropout >= 0 && attn_dropout < 1, ({"model.attn_dropout"}),
                  "model.attn_dropout must be in [0, 1), got ", attn_dropout);
  TF_CHECK_CONFIG(ln_eps > 0, ({"model.ln_eps"}), "model.ln_eps must be positive, got ", ln_eps);
  TF_CHECK_CONFIG(d_ff >= 0, ({"model.d_ff"}), "model.d_ff must be >= 0 (0 means 4 * d_model), got ", d_ff);
  TF_CHECK_CONFIG(arch == Architecture::bert || n_segments == 0, ({"model.n_segments"}),
                  "model.n_segments is a BERT option");
  TF_CHECK_CONFIG(causal == (arch == Architecture::gpt), ({"model.causal", "model.arch"}), "model.causal must be ",
                  arch == Architecture::gpt ? "true for a GPT (a causal language model)"
                                            : "false for a BERT (a bidirectional masked language model)");
  TF_CHECK_CONFIG(arch == Architecture::gpt || tie_embeddings, ({"model.tie_embeddings", "model.arch"}),
                  "model.tie_embeddings must be true for a BERT: its MLM decoder is the token embedding");
}

}  // namespace tf::layers

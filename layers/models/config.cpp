// ModelConfig -> block options, and consistency checks.
#include "layers/models/config.h"

#include <algorithm>
#include <cmath>

namespace tf::layers {

int64_t ModelConfig::heads(int64_t layer) const {
  return heads_per_layer.empty() ? n_heads : heads_per_layer.at(static_cast<size_t>(layer));
}

int64_t ModelConfig::kv_heads(int64_t layer) const { return heads(layer) / group_size(); }

int64_t ModelConfig::total_heads() const {
  int64_t total = 0;
  for (int64_t l = 0; l < n_layers; ++l) total += heads(l);
  return total;
}

MixerKind ModelConfig::mixer(int64_t layer) const {
  return mixers.empty() ? MixerKind::attention : mixers[static_cast<size_t>(layer) % mixers.size()];
}

TransformerBlock::Options ModelConfig::block_options(int64_t layer) const {
  TransformerBlock::Options b;
  const double residual_std = projection_init == "zero"    ? 0.0
                              : projection_init == "plain" ? init_std
                                                            : init_std / std::sqrt(2.0 * n_layers);
  b.attn.d_model = d_model;
  b.attn.n_heads = heads(layer);
  b.attn.n_kv_heads = kv_heads(layer);
  b.attn.head_dim = head_dim();
  b.attn.causal = causal;
  b.attn.bias = bias;
  b.attn.rope = position == PositionEncoding::rope;
  b.attn.rope_options.theta = rope_theta;
  b.attn.rope_options.scaling = rope_scaling;
  b.attn.variant = attention;
  b.attn.variant.alibi = position == PositionEncoding::alibi;
  if (position == PositionEncoding::t5) {
    b.attn.variant.relative_buckets = relative_buckets;
    b.attn.variant.relative_max_distance = relative_max_distance;
  }
  b.attn.attn_dropout = attn_dropout;
  b.attn.layer = attention_layer;
  b.attn.ln_eps = ln_eps;
  b.attn.vocab_size = vocab_size;
  b.attn.mixer = mixer(layer);
  b.mamba = {.d_model = d_model, .expand = mamba_expand, .state = mamba_state, .conv = mamba_conv,
             .init_std = init_std, .out_init_std = residual_std};
  if (!mixer_row(b.attn.mixer).forms_scores) {  // the score options act on the softmax layers only
    b.attn.rope = false;
    b.attn.variant = {};
    b.attn.attn_dropout = 0;
  }
  b.attn.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * static_cast<double>(layer));  // Ye et al. 2024, l = layer + 1
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
  std::vector<ConfigError> found = problems();
  if (!found.empty()) throw found.front();
}

// Checks that would read a field an earlier check found broken are skipped: a group size from an
// n_kv_heads that does not divide n_heads (it can be 0), a per-layer list of the wrong length.
std::vector<ConfigError> ModelConfig::problems() const {
  std::vector<ConfigError> found;
  TF_NOTE_CONFIG(found, vocab_size > 0, ({"model.vocab_size"}), "model.vocab_size must be positive, got ",
                 vocab_size);
  TF_NOTE_CONFIG(found, max_seq_len > 0, ({"model.max_seq_len"}), "model.max_seq_len must be positive, got ",
                 max_seq_len);
  TF_NOTE_CONFIG(found, d_model > 0 && n_layers > 0 && n_heads > 0,
                 ({"model.d_model", "model.n_layers", "model.n_heads"}),
                 "model.d_model, n_layers and n_heads must be positive");
  if (!found.empty()) return found;  // every check below divides by one of them
  const bool heads_divide = d_head > 0 || d_model % n_heads == 0;
  TF_NOTE_CONFIG(found, heads_divide, ({"model.d_model", "model.n_heads"}), "model.d_model (",
                 d_model, ") must be divisible by model.n_heads (", n_heads, "), or model.head_dim given");
  TF_NOTE_CONFIG(found, d_head >= 0, ({"model.head_dim"}),
                 "model.head_dim must be >= 0 (0 means d_model / n_heads), got ", d_head);
  const bool groups = n_kv_heads >= 0 && (n_kv_heads == 0 || n_heads % n_kv_heads == 0);  // group_size() >= 1
  TF_NOTE_CONFIG(found, groups, ({"model.n_heads", "model.n_kv_heads"}), "model.n_heads (", n_heads,
                 ") must be a multiple of model.n_kv_heads (", n_kv_heads, ")");
  TF_NOTE_CONFIG(found, !heads_divide || position != PositionEncoding::rope || head_dim() % 2 == 0,
                 ({"model.position", "model.head_dim", "model.d_model", "model.n_heads"}),
                 "model.position rope needs an even head_dim, got ", head_dim());
  const bool one_count_per_layer =
      heads_per_layer.empty() || static_cast<int64_t>(heads_per_layer.size()) == n_layers;
  if (!heads_per_layer.empty()) {
    TF_NOTE_CONFIG(found, one_count_per_layer, ({"model.heads_per_layer", "model.n_layers"}),
                   "model.heads_per_layer lists ", heads_per_layer.size(), " layers, model.n_layers is ", n_layers);
    for (size_t l = 0; groups && l < heads_per_layer.size(); ++l)
      TF_NOTE_CONFIG(found, heads_per_layer[l] > 0 && heads_per_layer[l] % group_size() == 0,
                     ({"model.heads_per_layer"}), "model.heads_per_layer: layer ", l, " has ", heads_per_layer[l],
                     " heads; each layer needs at least one, a multiple of the group size n_heads / n_kv_heads = ",
                     group_size());
    // Note [position support]: ALiBi's slope is a function of a head's index among n_heads; a layer with
    // heads removed would give its remaining heads other slopes than they were trained with.
    TF_NOTE_CONFIG(found, position_row(position).heads_removable, ({"model.heads_per_layer", "model.position"}),
                   "model.heads_per_layer cannot be used with model.position ", position_encoding_name(position),
                   ": each head's slope follows its index among model.n_heads");
  }
  if (groups && one_count_per_layer) mixer_problems(found);  // heads(l) and kv_heads(l) read both
  const ops::RopeScaling& sc = rope_scaling;
  TF_NOTE_CONFIG(found, sc.factor >= 1 && std::isfinite(sc.factor), ({"model.rope_scaling_factor"}),
                 "model.rope_scaling_factor must be >= 1 (the new context over the trained one), got ", sc.factor);
  TF_NOTE_CONFIG(found, sc.kind != ops::RopeScalingKind::none || sc.factor == 1,
                 ({"model.rope_scaling_factor", "model.rope_scaling"}), "model.rope_scaling_factor ", sc.factor,
                 " does nothing without model.rope_scaling (linear, ntk or yarn)");
  TF_NOTE_CONFIG(found, sc.kind == ops::RopeScalingKind::none || position == PositionEncoding::rope,
                 ({"model.rope_scaling", "model.position"}), "model.rope_scaling ",
                 ops::rope_scaling_name(sc.kind), " stretches RoPE's angles: it needs model.position: rope, got ",
                 position_encoding_name(position));
  // (YaRN without RoPE is the error above; its own needs are asked of a RoPE model only.)
  TF_NOTE_CONFIG(found,
                 sc.kind != ops::RopeScalingKind::yarn || position != PositionEncoding::rope || sc.original_context > 0,
                 ({"model.rope_original_context", "model.rope_scaling"}),
                 "model.rope_scaling yarn needs model.rope_original_context, the context length the model was "
                 "trained at (its data.seq_len), got ", sc.original_context);
  TF_NOTE_CONFIG(found, sc.alpha >= 0 && sc.alpha < sc.beta, ({"model.yarn_alpha", "model.yarn_beta"}),
                 "model.yarn_alpha must be >= 0 and below model.yarn_beta, got ", sc.alpha, " and ", sc.beta);
  TF_NOTE_CONFIG(found, relative_buckets >= 4 && relative_buckets % 2 == 0, ({"model.relative_buckets"}),
                 "model.relative_buckets must be even and >= 4 (half exact, half logarithmic; a BERT splits them "
                 "between keys before and after the query), got ", relative_buckets);
  TF_NOTE_CONFIG(found, relative_max_distance >= relative_buckets, ({"model.relative_max_distance"}),
                 "model.relative_max_distance must be >= model.relative_buckets (", relative_buckets, "), got ",
                 relative_max_distance);
  TF_NOTE_CONFIG(found, (attention.global_tokens == 0 && attention.random_blocks == 0) || attention.window > 0,
                 ({"model.attention_global_tokens", "model.attention_random_blocks", "model.attention_window"}),
                 "model.attention_global_tokens and model.attention_random_blocks add keys to a sliding window: "
                 "set model.attention_window too (without one every key is already seen)");
  TF_NOTE_CONFIG(found, attention.global_tokens >= 0 && attention.random_blocks >= 0 && attention.sparse_block > 0,
                 ({"model.attention_global_tokens", "model.attention_random_blocks", "model.attention_block_size"}),
                 "model.attention_global_tokens and attention_random_blocks must be >= 0 and attention_block_size > 0");
  TF_NOTE_CONFIG(found, attention.window >= 0, ({"model.attention_window"}),
                 "model.attention_window must be >= 0 (0 means no window), got ", attention.window);
  TF_NOTE_CONFIG(found, dropout >= 0 && dropout < 1, ({"model.dropout"}), "model.dropout must be in [0, 1), got ",
                 dropout);
  TF_NOTE_CONFIG(found, attn_dropout >= 0 && attn_dropout < 1, ({"model.attn_dropout"}),
                 "model.attn_dropout must be in [0, 1), got ", attn_dropout);
  TF_NOTE_CONFIG(found, ln_eps > 0, ({"model.ln_eps"}), "model.ln_eps must be positive, got ", ln_eps);
  TF_NOTE_CONFIG(found, d_ff >= 0, ({"model.d_ff"}), "model.d_ff must be >= 0 (0 means 4 * d_model), got ", d_ff);
  TF_NOTE_CONFIG(found, arch == Architecture::bert || n_segments == 0, ({"model.n_segments"}),
                 "model.n_segments is a BERT option");
  TF_NOTE_CONFIG(found, causal == (arch == Architecture::gpt), ({"model.causal", "model.arch"}),
                 "model.causal must be ",
                 arch == Architecture::gpt ? "true for a GPT (a causal language model)"
                                           : "false for a BERT (a bidirectional masked language model)");
  TF_NOTE_CONFIG(found, arch == Architecture::gpt || tie_embeddings, ({"model.tie_embeddings", "model.arch"}),
                 "model.tie_embeddings must be true for a BERT: its MLM decoder is the token embedding");
  return found;
}

// Differential attention pairs heads: each pair of query heads, and of key/value heads, becomes one
// differential head (Ye et al. 2024, section 2.1), so both counts must be even in each such layer.
// Its two maps take the mask options, RoPE and ALiBi like any softmax layer; T5's table (one row per
// softmax head) and dropout on the probabilities have no counterpart in the paper and are refused.
void ModelConfig::differential_problems(std::vector<ConfigError>& found) const {
  if (std::count(mixers.begin(), mixers.end(), MixerKind::differential) == 0) return;
  for (int64_t l = 0; l < n_layers; ++l) {
    if (mixer(l) != MixerKind::differential) continue;
    TF_NOTE_CONFIG(found, heads(l) % 2 == 0 && kv_heads(l) % 2 == 0,
                   ({"model.n_heads", "model.n_kv_heads", "model.mixer"}),
                   "model.mixer differential pairs heads: layer ", l, " needs an even number of query heads and "
                   "of key/value heads, got ", heads(l), " and ", kv_heads(l));
  }
  TF_NOTE_CONFIG(found, position_row(position).differential, ({"model.position", "model.mixer"}),
                 "model.mixer differential does not take model.position ", position_encoding_name(position),
                 " (Note [position support]); use ", position_names_with(&PositionRow::differential));
  TF_NOTE_CONFIG(found, attn_dropout == 0, ({"model.attn_dropout", "model.mixer"}),
                 "model.mixer differential does not take model.attn_dropout (the paper drops no attention "
                 "probabilities); set it to 0");
}

// What each mixer supports (layers/mixer.h). Linear attention and Mamba form no scores, so the
// options that act on scores (ALiBi and T5 biases, RoPE's rotation, whose relative positions would
// not survive phi, windows and sparse patterns, dropout on probabilities) act on the softmax layers
// of a hybrid only; in a model of such layers alone they would act on nothing, which is refused.
// Linear attention's state is per query head (no grouped key/value heads); Mamba is causal (GPT).
void ModelConfig::mixer_problems(std::vector<ConfigError>& found) const {
  TF_NOTE_CONFIG(found, mixers.empty() || n_layers % static_cast<int64_t>(mixers.size()) == 0,
                 ({"model.mixer", "model.n_layers"}), "model.mixer lists a pattern of ", mixers.size(),
                 " layers, which does not divide model.n_layers ", n_layers, " (it repeats over the layers)");
  differential_problems(found);
  const auto linear = std::count(mixers.begin(), mixers.end(), MixerKind::linear);
  const auto mamba = std::count(mixers.begin(), mixers.end(), MixerKind::mamba);
  TF_NOTE_CONFIG(found, linear == 0 || kv_heads() == n_heads, ({"model.n_kv_heads", "model.mixer"}),
                 "model.mixer linear keeps one key/value head per query head: model.n_kv_heads must be 0 or "
                 "model.n_heads");
  if (mamba > 0) {
    TF_NOTE_CONFIG(found, arch == Architecture::gpt, ({"model.mixer", "model.arch"}),
                   "model.mixer mamba is a causal mixer (a recurrence over time): a BERT cannot use it");
    TF_NOTE_CONFIG(found, mamba_expand > 0 && mamba_state > 0 && mamba_conv > 0,
                   ({"model.mamba_expand", "model.mamba_state", "model.mamba_conv"}),
                   "model.mamba_expand, mamba_state and mamba_conv must be positive, got ", mamba_expand, ", ",
                   mamba_state, ", ", mamba_conv);
  }
  // The attention layer's options act on multi-head layers (Note [attention layer options]).
  const bool some_heads =
      mixers.empty() || std::any_of(mixers.begin(), mixers.end(), [](MixerKind m) { return mixer_row(m).heads; });
  std::string with_heads;
  for (const MixerRow& row : kMixerTable)
    if (row.heads) with_heads += (with_heads.empty() ? "" : ", ") + std::string(row.name);
  for (const std::string& key : attention_layer.keys_used())
    TF_NOTE_CONFIG(found, some_heads, ({key, "model.mixer"}), key, " acts on multi-head layers (", with_heads,
                   "): with no such layer in model.mixer it would act on nothing");
  // Layers that form no attention scores (Note [mixer support]); a softmax layer takes the options.
  std::string scoreless_names;
  for (const MixerRow& row : kMixerTable)
    if (!row.forms_scores && std::count(mixers.begin(), mixers.end(), row.kind) > 0)
      scoreless_names += (scoreless_names.empty() ? "" : " and ") + std::string(row.name);
  if (mixers.empty() ||
      std::any_of(mixers.begin(), mixers.end(), [](MixerKind m) { return mixer_row(m).forms_scores; }))
    return;
  const std::string every = "model.mixer " + scoreless_names + " in every layer";
  TF_NOTE_CONFIG(found, position_row(position).absolute, ({"model.position", "model.mixer"}), every,  // Note [position support]
                 " takes model.position ", position_names_with(&PositionRow::absolute), ", got ",
                 position_encoding_name(position),
                 " (ALiBi and T5 act on scores, which these layers never form, and RoPE rotates queries and keys)");
  for (const std::string& key : kernels::variant_keys_used(attention))
    TF_NOTE_CONFIG(found, false, ({key, "model.mixer"}), key, " acts on attention scores: with ", every,
                   " it would act on nothing");
  TF_NOTE_CONFIG(found, attn_dropout == 0, ({"model.attn_dropout", "model.mixer"}),
                 "model.attn_dropout drops attention probabilities: with ", every, " it would act on nothing");
}

}  // namespace tf::layers

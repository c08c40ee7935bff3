// Which recipe keys have no effect, and why; see recipe_inert.h.
#include "train/recipe_inert.h"

#include <algorithm>

#include "train/recipe_schema.h"

namespace tf::train {

namespace {

using layers::Architecture;
using layers::MixerKind;
using layers::PositionEncoding;

// Keys that `inert` makes ineffective, and the reason (the setting responsible, then what to do).
// What each key acts on was read from the code that uses it: the layers for the model's keys,
// optim/ for the optimizer's and the schedule's, train/run.cpp and trainer.cpp for data and
// sampling. Not here, because they do act: model.max_seq_len (bounds data.seq_len and sizes every
// position table), eval.batches with eval.interval 0 (the default of `heads` and `prune`
// --batches), sample.prompt with sample.tokens 0 (the `sample` command the run's report suggests).
// Nor a value the configuration forces anyway, which says what happens: a BERT's sample.tokens 0 and
// tie_embeddings true (other values are errors of their own).
struct Rule {
  std::vector<std::string> keys;
  bool inert;
  std::string why;           // follows "<key> has no effect: "
  bool whole_message = false;  // `why` is the whole message
};

std::vector<Rule> rules(const Recipe& r) {
  const layers::ModelConfig& m = r.model;
  const std::string position = layers::position_encoding_name(m.position);
  const bool rope = m.position == PositionEncoding::rope;
  const auto mamba_layers = std::count(m.mixers.begin(), m.mixers.end(), MixerKind::mamba);
  const bool all_mamba = !m.mixers.empty() && mamba_layers == static_cast<int64_t>(m.mixers.size());
  const bool gpt = m.arch == Architecture::gpt;
  // A window acts wherever a query has more than `window` keys: in training windows of data.seq_len,
  // and when sampling, whose context grows to model.max_seq_len (Note [context window] in sample.cpp).
  const int64_t window = m.attention.window, context = std::max(r.data.seq_len, m.max_seq_len);
  const std::string covers = "model.attention_window (" + std::to_string(window) + ") covers the whole context of "
                             "data.seq_len (" + std::to_string(r.data.seq_len) + ") and model.max_seq_len (" +
                             std::to_string(m.max_seq_len) + ")";
  return {
      {{"model.rope_theta", "model.rope_scaling", "model.rope_scaling_factor", "model.rope_original_context",
        "model.yarn_alpha", "model.yarn_beta"},
       !rope, "model.position is " + position + ", and only rope turns queries and keys; remove the key, or set "
              "model.position: rope"},
      {{"model.rope_scaling_factor"}, rope && m.rope_scaling.kind == ops::RopeScalingKind::none,
       "model.rope_scaling is none; remove the key, or choose linear, ntk or yarn"},
      {{"model.rope_original_context", "model.yarn_alpha", "model.yarn_beta"},
       rope && m.rope_scaling.kind != ops::RopeScalingKind::yarn,
       "model.rope_scaling is " + std::string(ops::rope_scaling_name(m.rope_scaling.kind)) +
           ", and only yarn reads it; remove the key, or set model.rope_scaling: yarn"},
      {{"model.relative_buckets", "model.relative_max_distance"}, m.position != PositionEncoding::t5,
       "model.position is " + position + ", and only t5 has a relative bias table; remove the key, or set "
       "model.position: t5"},
      {{"model.mamba_expand", "model.mamba_state", "model.mamba_conv"}, mamba_layers == 0,
       "model.mixer has no mamba layer; remove the key, or put mamba in model.mixer"},
      {{"model.n_heads", "model.n_kv_heads", "model.head_dim", "model.heads_per_layer"}, all_mamba,
       "model.mixer is mamba in every layer, and a Mamba layer has no attention heads; remove the key"},
      {{"model.attention_window"}, window >= context,
       covers + ", so it has no effect: every query already sees every key; remove the key, or make the window "
       "smaller", true},
      {{"model.attention_global_tokens", "model.attention_random_blocks"}, window >= context,
       covers + ", so every query already sees every key; remove the key"},
      {{"model.attention_block_size", "model.attention_random_seed"}, m.attention.random_blocks == 0,
       "model.attention_random_blocks is 0, and only BigBird's random blocks read it; remove the key"},
      {{"model.gelu"}, gpt && m.feed_forward != kernels::FeedForwardKind::gelu,  // (a BERT's MLM head has a GELU)
       "model.feed_forward is " + std::string(kernels::feed_forward_kind_name(m.feed_forward)) +
           ", which has no GELU, and a GPT has no other; remove the key"},
      {{"data.bpe_vocab_size", "data.bpe_sample_mb"}, r.data.tokenizer != "bpe",
       "data.tokenizer is " + r.data.tokenizer + "; remove the key, or set data.tokenizer: bpe"},
      {{"data.mask_prob", "data.mask_span", "data.mask_replace_prob", "data.random_replace_prob"}, gpt, "model.arch is gpt, and only a BERT masks positions to predict; remove the key"},
      {{"data.seq_len_start"}, r.data.seq_len_warmup == 0,
       "data.seq_len_warmup is 0, so every window has data.seq_len tokens; remove the key, or set "
       "data.seq_len_warmup"},
      {{"train.batch_start"}, r.train.batch_warmup == 0,
       "train.batch_warmup is 0, so every micro-batch has train.batch_size rows; remove the key, or set "
       "train.batch_warmup"},
      {{"data.vocab_size"}, r.data.corpus != "tokens",
       "data.corpus is " + r.data.corpus + ", whose vocabulary the tokenizer learns from the text; remove the key"},
      {{"data.tokenizer", "data.bpe_vocab_size", "data.bpe_sample_mb"}, r.data.corpus == "tokens",
       "data.corpus is tokens: the files hold ids already, and the ids are the tokens; remove the key"},
      {{"data.brown_dir"}, r.data.corpus != "brown",
       "data.corpus is " + r.data.corpus + ", which does not read the Brown corpus; remove the key"},
      {{"optim.beta1", "optim.beta2", "optim.eps"}, r.optim.name == "sgd",
       "optim.name is sgd, and only Adam and AdamW read it; remove the key"},
      {{"optim.momentum"}, r.optim.name != "sgd",
       "optim.name is " + r.optim.name + ", and only sgd reads it (Adam's momentum is optim.beta1" +
           (r.optim.name == "muon" ? ", Muon's optim.muon_momentum" : "") + "); remove the key"},
      {{"optim.muon_lr", "optim.muon_momentum", "optim.muon_nesterov"}, r.optim.name != "muon",
       "optim.name is " + r.optim.name + ", and only muon reads it; remove the key, or set optim.name: muon"},
      {{"optim.decay_biases_and_norms", "optim.decay_embeddings"}, r.optim.weight_decay == 0,
       "optim.weight_decay is 0, so nothing is decayed; remove the key"},
      {{"schedule.min_lr"}, r.schedule.kind == "constant",
       "schedule.kind is constant, so the rate never decays to it; remove the key, or set schedule.kind: cosine, "
       "linear or wsd"},
      {{"schedule.cooldown_fraction"}, r.schedule.kind != "wsd",
       "schedule.kind is " + r.schedule.kind + ", and only wsd has a cooldown; remove the key, or set schedule.kind: wsd"},
      {{"sample.prompt", "sample.temperature", "sample.top_k", "sample.top_p"}, !gpt,
       "model.arch is bert, and a BERT samples nothing after training; remove the key"},
      {{"sample.temperature", "sample.top_k", "sample.top_p"}, r.sample.tokens == 0,
       "sample.tokens is 0, so nothing is sampled after training; remove the key"},
      {{"sample.top_k", "sample.top_p"}, r.sample.temperature == 0,
       "sample.temperature is 0: greedy sampling takes the most likely token; remove the key"},
  };
}

}  // namespace

std::vector<InertKey> inert_keys(const Recipe& r, const std::function<bool(const std::string&)>& written) {
  const std::vector<Rule> all = rules(r);
  std::vector<InertKey> out;
  for (const Field& f : recipe_fields()) {
    if (!written(f.key)) continue;
    for (const Rule& rule : all)
      if (rule.inert && std::find(rule.keys.begin(), rule.keys.end(), f.key) != rule.keys.end()) {
        out.push_back({f.key, rule.whole_message ? rule.why : f.key + " has no effect: " + rule.why});
        break;
      }
  }
  return out;
}

}  // namespace tf::train

// Every recipe key: type, range, meaning, accessors. Defaults live in the config structs.
#include "train/recipe_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

#include <yaml-cpp/yaml.h>

namespace tf::train {

namespace {

using layers::Architecture;
using layers::PositionEncoding;

std::string format_number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that round-trips
  std::string s(buf, end);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a float in YAML
  return s;
}

template <class Ref>
Field integer(std::string key, std::string meaning, Ref ref, int64_t min,
              int64_t max = std::numeric_limits<int32_t>::max()) {
  std::string type = "integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return {key, type, meaning, false, [ref](const Recipe& r) { return std::to_string(ref(const_cast<Recipe&>(r))); },
          [ref, min, max, type](Recipe& r, const std::string& s) {
            int64_t v = 0;
            auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) throw BadValue{"an " + type};
            ref(r) = v;
          }};
}

// The items of a list written "[a, b, c]" or "a, b, c" (as --set gives it), spaces trimmed.
std::vector<std::string_view> list_items(std::string_view rest) {
  if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  std::vector<std::string_view> items;
  while (rest.find_first_not_of(" ") != std::string_view::npos) {
    const size_t comma = std::min(rest.find(','), rest.size());
    std::string_view item = rest.substr(0, comma);
    item.remove_prefix(std::min(item.find_first_not_of(' '), item.size()));
    items.push_back(item.substr(0, item.find_last_not_of(' ') + 1));
    rest = rest.substr(std::min(comma + 1, rest.size()));
  }
  return items;
}

// A list field whose items `to_text` writes and `parse` reads (throwing BadValue); empty is allowed
// (the default it stands for is in `meaning`).
template <class Ref, class ToText, class Parse>
Field list_field(std::string key, std::string type, std::string meaning, Ref ref, ToText to_text, Parse parse) {
  Field f{key, type, meaning, false,
          [ref, to_text](const Recipe& r) {
            std::string out;
            for (const auto& v : ref(const_cast<Recipe&>(r))) out += (out.empty() ? "" : ", ") + to_text(v);
            return "[" + out + "]";
          },
          [ref, parse](Recipe& r, const std::string& s) {
            std::remove_reference_t<decltype(ref(r))> values;
            for (std::string_view item : list_items(s)) values.push_back(parse(item));
            ref(r) = values;
          }};
  f.is_list = true;
  return f;
}

// A list of integers, each in [min, max].
template <class Ref>
Field integer_list(std::string key, std::string meaning, Ref ref, int64_t min, int64_t max) {
  std::string type = "list of integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return list_field(key, type, meaning, ref, [](int64_t v) { return std::to_string(v); },
                    [min, max, type](std::string_view item) {
                      int64_t v = 0;
                      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
                      if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < min || v > max)
                        throw BadValue{"a " + type};
                      return v;
                    });
}

// A list of names, each one of `options`.
template <class Ref, class T>
Field choice_list(std::string key, std::string meaning, Ref ref, std::vector<std::pair<std::string, T>> options) {
  std::string type = "list of:";
  for (size_t i = 0; i < options.size(); ++i) type += (i ? ", " : " ") + options[i].first;
  return list_field(key, type, meaning, ref,
                    [options](T v) {
                      for (const auto& [name, value] : options)
                        if (value == v) return name;
                      return std::string("?");
                    },
                    [options, type](std::string_view item) {
                      for (const auto& [name, value] : options)
                        if (name == item) return value;
                      throw BadValue{"a " + type};
                    });
}

// A number in [min, max] (or (min, max] when min_open).
template <class Ref>
Field number(std::string key, std::string meaning, Ref ref, double min, double max, bool min_open = false,
             bool max_open = false) {
  std::string type = std::string("number in ") + (min_open ? "(" : "[") + format_number(min) + ", " +
                     (std::isinf(max) ? "inf" : format_number(max)) + (max_open || std::isinf(max) ? ")" : "]");
  return {key, type, meaning, false, [ref](const Recipe& r) { return format_number(ref(const_cast<Recipe&>(r))); },
          [ref, min, max, min_open, max_open, type](Recipe& r, const std::string& s) {
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            const bool parsed = !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);
            const bool in_range = (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
            if (!parsed || !in_range) throw BadValue{"a " + type};
            ref(r) = v;
          }};
}

template <class Ref>
Field boolean(std::string key, std::string meaning, Ref ref) {
  return {key, "boolean (true or false)", meaning, false,
          [ref](const Recipe& r) { return std::string(ref(const_cast<Recipe&>(r)) ? "true" : "false"); },
          [ref](Recipe& r, const std::string& s) {
            if (s != "true" && s != "false") throw BadValue{"a boolean (true or false)"};
            ref(r) = s == "true";
          }};
}

template <class Ref>
Field text(std::string key, std::string meaning, Ref ref) {
  return {key, "string", meaning, true, [ref](const Recipe& r) { return ref(const_cast<Recipe&>(r)); },
          [ref](Recipe& r, const std::string& s) { ref(r) = s; }};
}

// Paths: one written as a string, or a YAML list of them ("[a.txt, 'b, c.txt']"; --set takes the same
// flow form). Got as the path alone when there is one, else as a YAML flow list; "" when empty.
template <class Ref>
Field path_list(std::string key, std::string meaning, Ref ref) {
  const std::string type = "path or list of paths";
  Field f{key, type, meaning, true,
          [ref](const Recipe& r) -> std::string {
            const std::vector<std::string>& paths = ref(const_cast<Recipe&>(r));
            if (paths.size() <= 1) return paths.empty() ? "" : paths[0];
            YAML::Emitter flow;
            flow << YAML::Flow << YAML::BeginSeq;
            for (const std::string& p : paths) flow << p;
            return (flow << YAML::EndSeq).c_str();
          },
          [ref, type](Recipe& r, const std::string& s) {
            std::vector<std::string> paths;
            if (s.rfind('[', 0) != 0) {
              if (!s.empty()) paths.push_back(s);
            } else {
              YAML::Node list;
              try {
                list = YAML::Load(s);
              } catch (const YAML::Exception&) {
                throw BadValue{"a " + type + " (a list is written [a.txt, b.txt])"};
              }
              if (!list.IsSequence()) throw BadValue{"a " + type + " (a list is written [a.txt, b.txt])"};
              for (const YAML::Node& item : list) {
                if (!item.IsScalar() || item.Scalar().empty()) throw BadValue{"a " + type + ", each a non-empty string"};
                paths.push_back(item.Scalar());
              }
            }
            ref(r) = paths;
          }};
  f.is_list = true;
  return f;
}

// One of a fixed set of names, stored as the value paired with the name.
template <class Ref, class T>
Field choice(std::string key, std::string meaning, Ref ref, std::vector<std::pair<std::string, T>> options) {
  std::string type = "one of:";
  for (size_t i = 0; i < options.size(); ++i) type += (i ? ", " : " ") + options[i].first;
  return {key, type, meaning, false,
          [ref, options](const Recipe& r) {
            for (const auto& [name, value] : options)
              if (value == ref(const_cast<Recipe&>(r))) return name;
            return std::string("?");
          },
          [ref, options, type](Recipe& r, const std::string& s) {
            for (const auto& [name, value] : options)
              if (name == s) return void(ref(r) = value);
            throw BadValue{type};
          }};
}

template <class T>
std::vector<std::pair<std::string, T>> same_names(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, T>> out;
  for (const std::string& n : names) out.emplace_back(n, n);
  return out;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// The (name, value) pairs of an enum's values, named by its own name function (names stated once).
template <class Values, class Name>
auto named(const Values& values, Name name) {
  std::vector<std::pair<std::string, std::decay_t<decltype(*std::begin(values))>>> pairs;
  for (auto v : values) pairs.emplace_back(name(v), v);
  return pairs;
}

#define REF(expr) [](Recipe& r) -> auto& { return r.expr; }

// The model section: one line per key (docs/recipes.md's model table).
std::vector<Field> model_fields() {
  return {
      choice("model.arch", "gpt (causal language model) or bert (masked language model)", REF(model.arch),
             std::vector<std::pair<std::string, Architecture>>{{"gpt", Architecture::gpt}, {"bert", Architecture::bert}}),
      integer("model.max_seq_len", "positions the model can attend over", REF(model.max_seq_len), 1, 1 << 20),
      integer("model.d_model", "width of the residual stream", REF(model.d_model), 1, 1 << 16),
      integer("model.n_layers", "transformer blocks", REF(model.n_layers), 1, 1024),
      integer("model.n_heads", "attention heads; d_model must be divisible by it", REF(model.n_heads), 1, 1024),
      integer("model.n_kv_heads", "key/value heads (grouped-query attention); 0 means n_heads", REF(model.n_kv_heads), 0, 1024),
      integer_list("model.heads_per_layer", "query heads of each layer, e.g. [4, 3, 2, 4] (a pruned model); empty: model.n_heads in every layer",
                   REF(model.heads_per_layer), 1, 1024),
      integer("model.head_dim", "size of each head; 0 means d_model / n_heads (a pruned model states it)", REF(model.d_head), 0, 1 << 16),
      integer("model.d_ff", "feed-forward hidden width; 0 means 4 * d_model", REF(model.d_ff), 0, 1 << 20),
      choice_list("model.mixer", "the sequence mixer of each layer, a pattern repeated over the layers: e.g. [linear], or [attention, linear] to alternate (docs/models.md); empty: attention everywhere",
                  REF(model.mixers), named(layers::kMixerKinds, layers::mixer_name)),
      integer("model.mamba_expand", "mixer mamba: channels E = mamba_expand * d_model", REF(model.mamba_expand), 1, 64),
      integer("model.mamba_state", "mixer mamba: state size N per channel", REF(model.mamba_state), 1, 1024),
      integer("model.mamba_conv", "mixer mamba: taps of the causal depthwise convolution", REF(model.mamba_conv), 1, 64),
      choice("model.position", "position encoding (docs/models.md)", REF(model.position),
             named(layers::kPositionEncodings, layers::position_encoding_name)),
      integer("model.attention_window", "sliding-window attention: a query sees the last attention_window positions (and as many ahead when not causal); 0 = all", REF(model.attention.window), 0, 1 << 20),
      integer("model.attention_global_tokens", "Longformer: the first g positions see every key and every query sees them (needs attention_window)", REF(model.attention.global_tokens), 0, 1 << 20),
      integer("model.attention_random_blocks", "BigBird: each query block also sees this many random key blocks (needs attention_window)", REF(model.attention.random_blocks), 0, 1024),
      integer("model.attention_block_size", "BigBird: the block size of the random pattern", REF(model.attention.sparse_block), 1, 1 << 16),
      integer("model.attention_random_seed", "BigBird: the seed of the random blocks", REF(model.attention.random_seed), 0, int64_t{1} << 62),
      number("model.logit_softcap", "Gemma 2's soft cap on attention scores: s -> c tanh(s / c) after every bias, bounding them to (-c, c); 0 = off", REF(model.attention.logit_softcap), 0.0, kInf),
      boolean("model.qk_norm", "RMSNorm on each head's queries and keys before RoPE, with learned scales of head_dim shared by the heads (OLMo 2, Qwen 3)", REF(model.attention_layer.qk_norm)),
      boolean("model.attention_gate", "a sigmoid gate on each head's output, elementwise, from the layer's input: o * sigmoid(x W_g^T + b_g) before W_O (Qiu et al. 2025; Qwen3-Next)", REF(model.attention_layer.attention_gate)),
      boolean("model.value_embeddings", "a table per attention layer, (vocab, n_kv_heads head_dim), whose row for each token is added to that position's values (the modded-nanoGPT speedrun's value embeddings)", REF(model.attention_layer.value_embeddings)),
      number("model.final_softcap", "Gemma 2's soft cap on the output logits: z -> c tanh(z / c), bounding them to (-c, c); 0 = off", REF(model.final_softcap), 0.0, kInf),
      number("model.rope_theta", "RoPE base: pair i turns at pos * theta^(-2i/head_dim)", REF(model.rope_theta), 1.0, kInf, true),
      integer("model.relative_buckets", "position t5: buckets of the learned relative bias, half exact, half logarithmic in distance", REF(model.relative_buckets), 4, 1024),
      integer("model.relative_max_distance", "position t5: distances beyond it share the last bucket", REF(model.relative_max_distance), 4, 1 << 20),
      choice("model.rope_scaling", "stretch RoPE to a longer context: none, linear (position interpolation), ntk (NTK-aware base) or yarn (docs/models.md)",
             REF(model.rope_scaling.kind), named(ops::kRopeScalingKinds, ops::rope_scaling_name)),
      number("model.rope_scaling_factor", "s >= 1: the new context over the trained one (with model.rope_scaling)", REF(model.rope_scaling.factor), 1.0, kInf),
      integer("model.rope_original_context", "the context length the model was trained at; YaRN's ramp reads it", REF(model.rope_scaling.original_context), 0, 1 << 20),
      number("model.yarn_alpha", "YaRN: pairs turning fewer than alpha times over the original context are interpolated", REF(model.rope_scaling.alpha), 0.0, kInf),
      number("model.yarn_beta", "YaRN: pairs turning more than beta times are left as trained", REF(model.rope_scaling.beta), 0.0, kInf),
      boolean("model.causal", "causal attention mask; defaults from arch (gpt: true, bert: false), which it must match", REF(model.causal)),
      boolean("model.pre_norm", "layer norm before each sublayer (GPT-2) instead of after the residual sum; defaults from arch (gpt: true, bert: false)", REF(model.pre_norm)),
      number("model.dropout", "dropout on embeddings and sublayer outputs", REF(model.dropout), 0.0, 1.0, false, true),
      number("model.attn_dropout", "dropout on attention probabilities", REF(model.attn_dropout), 0.0, 1.0, false, true),
      number("model.ln_eps", "epsilon added to the variance in layer norm", REF(model.ln_eps), 0.0, 1.0, true),
      choice("model.norm", "layer (layer norm: centre, scale, shift) or rms (RMSNorm: scale by the root mean square, no bias)", REF(model.norm),
             named(kernels::kNormKinds, kernels::norm_kind_name)),
      choice("model.gelu", "GELU form: tanh approximation (GPT-2) or exact erf (BERT)", REF(model.gelu),
             std::vector<std::pair<std::string, ops::GeluApprox>>{{"tanh", ops::GeluApprox::tanh}, {"erf", ops::GeluApprox::erf}}),
      choice("model.feed_forward", "gelu (the MLP: GELU between two projections), swiglu (gated: SiLU(gate) * value, Shazeer 2020) or relu2 (the MLP with ReLU(x)^2, Primer)",
             REF(model.feed_forward), named(kernels::kFeedForwardKinds, kernels::feed_forward_kind_name)),
      boolean("model.tie_embeddings", "GPT: the LM head reuses the token embedding (BERT: always)", REF(model.tie_embeddings)),
      boolean("model.bias", "biases in linear layers", REF(model.bias)),
      integer("model.n_segments", "must be 0: BERT segment embeddings need sentence-pair batches, which no batcher makes (kept so older recipes and checkpoints read)", REF(model.n_segments), 0, 16),
      number("model.init_std", "standard deviation of the normal initialisation of weights", REF(model.init_std), 0.0, 1.0, true),
      choice("model.projection_init", "the residual projections (attention, MLP and Mamba outputs): scaled (N(0, init_std / sqrt(2 n_layers)), GPT-2), plain (N(0, init_std), like every other weight) or zero (every block starts as the identity)",
             REF(model.projection_init), same_names<std::string>({"scaled", "plain", "zero"})),
  };
}

// Every section but the model: data, optimizer, schedule, training, evaluation, checkpoints, logs, sampling.
std::vector<Field> run_fields() {
  return {
      choice("data.corpus", "brown (the Brown corpus) or linux (the Linux kernel's C sources), both installed by scripts/setup.sh; files (text: train_path / val_path); tokens (token files tokenized elsewhere, such as llm.c's .bin: train_path / val_path)", REF(data.corpus),
             same_names<std::string>({"brown", "linux", "files", "tokens"})),
      text("data.root", "folder of the installed corpora and the token shards; empty: $TAPEFORMER_DATA, else ~/.cache/tapeformer (docs/data.md)", REF(data.root)),
      path_list("data.train_path", "corpus files: UTF-8 text to train on: a file, a folder (every file under it) or a glob (*, ?, [...], **), or a list of them; docs/data.md", REF(data.train_path)),
      path_list("data.val_path", "corpus files: validation text, in the same forms; empty: held out from train_path (every tenth file of ten or more, else the last 10%)", REF(data.val_path)),
      integer("data.vocab_size", "corpus tokens: the vocabulary, above every id in the files (50257 for llm.c's GPT-2 ids); 0: the largest id + 1", REF(data.vocab_size), 0, std::numeric_limits<int32_t>::max() - 16),
      choice("data.tokenizer", "char (UTF-8 characters) or bpe (byte-level BPE trained on the corpus)", REF(data.tokenizer),
             same_names<std::string>({"char", "bpe"})),
      integer("data.bpe_vocab_size", "tokenizer bpe: vocabulary size including the 256 bytes", REF(data.bpe_vocab_size), 260, 1 << 20),
      integer("data.bpe_sample_mb", "tokenizer bpe: megabytes of the training text the merges are learned from (a sample spread over it; docs/data.md)", REF(data.bpe_sample_mb), 1, 1 << 20),
      integer("data.seq_len", "tokens per training window; at most model.max_seq_len", REF(data.seq_len), 1, 1 << 20),
      integer("data.seq_len_warmup", "GPT: steps over which the training windows grow linearly from data.seq_len_start to data.seq_len, in multiples of 8 (sequence-length warm-up, Li et al. 2022); 0: every step at data.seq_len", REF(data.seq_len_warmup), 0, 1 << 30),
      integer("data.seq_len_start", "GPT, with data.seq_len_warmup: the first steps' window length; 0: a quarter of data.seq_len", REF(data.seq_len_start), 0, 1 << 20),
      text("data.cache_dir", "folder of the prepared token shards (docs/data.md); empty: <data root>/shards; deleting it costs one preparation", REF(data.cache_dir)),
      text("data.brown_dir", "corpus brown: the folder setup fills (raw documents in <brown_dir>/raw; the split is written beside them); empty: <data root>/brown", REF(data.brown_dir)),
      number("data.mask_prob", "BERT: fraction of positions chosen for prediction", REF(data.mask_prob), 0.0, 1.0, true),
      number("data.mask_span", "BERT: mean length of a chosen span (SpanBERT: geometric, capped at 10); 1: positions chosen independently", REF(data.mask_span), 1.0, 10.0),
      number("data.mask_replace_prob", "BERT: of the chosen positions, the share shown as [MASK]", REF(data.mask_replace_prob), 0.0, 1.0),
      number("data.random_replace_prob", "BERT: of the chosen positions, the share shown as a random token (the rest are kept); with mask_replace_prob at most 1", REF(data.random_replace_prob), 0.0, 1.0),

      choice("optim.name", "optimizer", REF(optim.name), same_names<std::string>(optim::optimizer_names())),
      number("optim.lr", "peak learning rate", REF(optim.lr), 0.0, 10.0, true),
      number("optim.beta1", "Adam: first-moment decay", REF(optim.beta1), 0.0, 1.0, false, true),
      number("optim.beta2", "Adam: second-moment decay", REF(optim.beta2), 0.0, 1.0, false, true),
      number("optim.eps", "Adam: added to the root of the second moment", REF(optim.eps), 0.0, 1.0, true),
      number("optim.weight_decay", "AdamW: decoupled decay; SGD/Adam: L2 added to the gradient", REF(optim.weight_decay), 0.0, 10.0),
      number("optim.momentum", "SGD momentum", REF(optim.momentum), 0.0, 1.0, false, true),
      boolean("optim.nesterov", "SGD: Nesterov momentum", REF(optim.nesterov)),
      number("optim.muon_lr", "Muon: peak learning rate of the hidden weight matrices (optim.lr is AdamW's, for the rest); the schedule scales both alike", REF(optim.muon_lr), 0.0, 10.0, true),
      number("optim.muon_momentum", "Muon: momentum of the hidden weight matrices", REF(optim.muon_momentum), 0.0, 1.0, false, true),
      boolean("optim.muon_nesterov", "Muon: Nesterov momentum", REF(optim.muon_nesterov)),
      boolean("optim.decay_biases_and_norms", "apply weight decay to biases and layer-norm parameters too", REF(optim.decay_biases_and_norms)),
      boolean("optim.decay_embeddings", "apply weight decay to embeddings too", REF(optim.decay_embeddings)),

      choice("schedule.kind", "learning-rate schedule after warmup", REF(schedule.kind),
             same_names<std::string>({"constant", "cosine", "linear", "wsd"})),
      integer("schedule.warmup_steps", "steps of linear warmup from 0 to optim.lr", REF(schedule.warmup_steps), 0),
      number("schedule.min_lr", "floor the decay ends at; at most optim.lr", REF(schedule.min_lr), 0.0, 10.0),
      number("schedule.cooldown_fraction", "wsd: share of the steps after warmup spent decaying linearly to min_lr (the rest stay at optim.lr)",
             REF(schedule.cooldown_fraction), 0.0, 1.0),

      integer("train.steps", "optimizer steps", REF(train.steps), 1),
      integer("train.batch_size", "sequences per micro-batch", REF(train.batch_size), 1, 1 << 16),
      integer("train.grad_accum", "micro-batches per optimizer step", REF(train.grad_accum), 1, 1 << 16),
      integer("train.batch_warmup", "steps over which each micro-batch grows linearly from train.batch_start rows to train.batch_size (batch-size warm-up, as GPT-3 trained); 0: every step at train.batch_size", REF(train.batch_warmup), 0, 1 << 30),
      integer("train.batch_start", "with train.batch_warmup: the first steps' rows per micro-batch; 0: a quarter of train.batch_size", REF(train.batch_start), 0, 1 << 16),
      number("train.grad_clip", "global gradient-norm limit; 0 disables", REF(train.grad_clip), 0.0, kInf),
      integer("train.seed", "seed of initialisation, data order, masking and dropout", REF(train.seed), 0),
      integer("train.threads", "OpenMP threads; 0 means the physical cores (OMP_NUM_THREADS wins when set)", REF(train.threads), 0, 1024),
      boolean("train.anomaly", "stop at the first non-finite value, naming the op and layer", REF(train.anomaly)),
      text("train.time_budget", "a duration (90s, 5m, 1.5h): the step count is fixed from the measured speed to end on time; train.steps bounds it",
           REF(train.time_budget)),
      choice("train.sequence_parallel", "off, or under mpirun split every sequence over the ranks, attention by ring "
             "attention: contiguous (rank r holds chunk r) or zigzag (chunks r and 2N-1-r: balanced under a causal mask)",
             REF(train.sequence_parallel), same_names<std::string>({"off", "contiguous", "zigzag"})),
      choice("train.recompute", "off, or blocks: each transformer block keeps only its input and runs again during backward "
             "(activation recomputation): the same numbers with less memory, for about a quarter more time per step",
             REF(train.recompute), same_names<std::string>({"off", "blocks"})),
      choice("train.thread_split", "how the threads share a step: batch (each thread runs forward and backward on its own rows "
             "of the batch), ops (the threads split each op), or auto: batch, except with train.deterministic, train.anomaly, "
             "sequence parallel training or more than one rank", REF(train.thread_split), same_names<std::string>({"auto", "batch", "ops"})),
      choice("train.matmul_precision", "fp32, or bf16: the forward and backward matmuls of a step multiply their operands "
             "rounded to bfloat16 and add in float32 (mixed precision: about 1.8x faster on CPUs whose AVX512_BF16 or AMX is fast, "
             "slower elsewhere), or auto: bf16 where the CPU multiplies bfloat16 in hardware and a timed product shows it faster "
             "than fp32, fp32 elsewhere",
             REF(train.matmul_precision), same_names<std::string>({"fp32", "bf16", "auto"})),
      boolean("train.deterministic", "bit-identical losses and weights for any train.threads (matmuls cut by shape; slower)",
              REF(train.deterministic)),

      integer("eval.interval", "steps between validation runs; 0 disables", REF(eval.interval), 0),
      integer("eval.batches", "validation batches per run", REF(eval.batches), 1, 1 << 20),

      text("checkpoint.dir", "run folder: checkpoints, metrics and the resolved recipe", REF(checkpoint.dir)),
      integer("checkpoint.interval", "steps between checkpoints; the last step always writes one; 0: only the last", REF(checkpoint.interval), 0),
      integer("checkpoint.keep", "checkpoints kept in the run folder", REF(checkpoint.keep), 1, 1000),

      integer("log.interval", "steps between metrics records (metrics.jsonl); not the progress line", REF(log.interval), 1),
      boolean("log.report", "after training, write report.html into the run folder (tapeformer report)", REF(log.report)),

      integer("sample.tokens", "GPT: tokens sampled after training; 0 disables (BERT: always 0)", REF(sample.tokens), 0, 1 << 20),
      text("sample.prompt", "GPT: text the sample continues", REF(sample.prompt)),
      number("sample.temperature", "softmax temperature; 0 is greedy", REF(sample.temperature), 0.0, 100.0),
      integer("sample.top_k", "keep the k most likely tokens; 0 keeps all", REF(sample.top_k), 0),
      number("sample.top_p", "nucleus sampling: smallest set with this probability mass", REF(sample.top_p), 0.0, 1.0, true),
  };
}

std::vector<Field> make_fields() {
  std::vector<Field> fields = model_fields();
  for (Field& f : run_fields()) fields.push_back(std::move(f));
  return fields;
}

#undef REF

}  // namespace

const std::vector<Field>& recipe_fields() {
  static const std::vector<Field> fields = make_fields();
  return fields;
}

const Field* find_field(const std::string& key) {
  for (const Field& f : recipe_fields())
    if (f.key == key) return &f;
  return nullptr;
}

}  // namespace tf::train

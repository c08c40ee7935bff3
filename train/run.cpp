// Building a run's parts from a recipe.
#include "train/run.h"

#include "data/bpe_tokenizer.h"
#include "data/brown.h"
#include "data/char_tokenizer.h"
#include "data/root.h"
#include "data/token_corpus.h"
#include "framework/looked_for.h"
#include "optim/factory.h"

namespace tf::train {

namespace {
const std::vector<std::string> kBertSpecials = {"[PAD]", "[MASK]", "[CLS]", "[SEP]"};
}

data::PreparedCorpus prepare_recipe_corpus(const DataConfig& d, layers::Architecture arch,
                                           const data::Tokenizer* given, bool write, std::ostream* progress) {
  if (d.corpus == "tokens") {
    data::TokenCorpusSpec tokens;
    tokens.train_path = d.train_path.empty() ? "" : d.train_path[0];
    tokens.val_path = d.val_path.empty() ? "" : d.val_path[0];
    tokens.vocab_size = d.vocab_size;
    if (arch == layers::Architecture::bert) tokens.specials = kBertSpecials;
    tokens.given = given;
    return data::open_token_corpus(tokens);
  }
  data::CorpusSpec corpus;
  if (d.corpus == "brown") {
    const std::filesystem::path brown = d.brown_folder();
    const data::BrownSplits splits = data::prepare_brown(brown / "raw", brown);
    corpus.train_paths = {splits.train.string()};
    corpus.val_paths = {splits.val.string()};
  } else if (d.corpus == "linux") {
    // scripts/setup.sh renames the unpacked tree into place whole, with .complete in it.
    const std::filesystem::path linux = d.linux_folder();
    std::error_code ec;
    TF_CHECK_INPUT(std::filesystem::is_regular_file(linux / ".complete", ec),
                   "data.corpus linux: no Linux sources at '", linux.string(), "' (", looked_for(linux),
                   "): run `scripts/setup.sh --corpus linux` to unpack them (1.2 GB), or set data.root (",
                   data::data_root_origin(d.root), " is ", d.root_folder().string(), ")");
    corpus.train_paths = {linux.string()};
  } else {
    corpus.train_paths = d.train_path;
    corpus.val_paths = d.val_path;
  }
  data::TokenizerSpec tokenizer;
  tokenizer.kind = d.tokenizer;
  tokenizer.bpe_vocab_size = d.bpe_vocab_size;
  tokenizer.sample_bytes = static_cast<uint64_t>(d.bpe_sample_mb) * 1000000;
  if (arch == layers::Architecture::bert) tokenizer.specials = kBertSpecials;
  tokenizer.given = given;
  data::PrepareOptions options;
  options.cache_dir = d.cache_folder();
  options.write = write;
  options.progress = progress;
  return data::prepare_corpus(corpus, tokenizer, options);
}

std::string quoted_paths(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) out += (out.empty() ? "'" : ", '") + p + "'";
  return paths.size() > 1 ? "[" + out + "]" : out;
}

std::string corpus_description(const DataConfig& d, const data::PreparedCorpus& corpus) {
  if (d.corpus == "brown") {
    const std::filesystem::path brown = d.brown_folder();
    return "Brown corpus (" + (brown / "train.txt").string() + ", " + (brown / "val.txt").string() + ")";
  }
  if (d.corpus == "linux") return "Linux kernel C sources (" + d.linux_folder().string() + "): " + corpus.description;
  if (d.corpus == "tokens") return corpus.description;
  return quoted_paths(d.train_path) + (d.val_path.empty() ? "" : ", validation " + quoted_paths(d.val_path)) + ": " +
         corpus.description;
}

Batches::Batches(const Recipe& r, const data::Tokenizer& tokenizer, data::Tokens ids, uint64_t seed,
                 bool sequential) {
  const int64_t b = r.train.batch_size, t = r.data.seq_len;
  if (r.model.arch == layers::Architecture::bert) {
    const auto tokens = data::MaskedLmTokens::from(tokenizer);
    const data::MaskingOptions masking{.prob = r.data.mask_prob,
                                       .mask_replace_prob = r.data.mask_replace_prob,
                                       .random_replace_prob = r.data.random_replace_prob,
                                       .span = r.data.mask_span};
    masked_ = std::make_unique<data::MaskedLmBatcher>(
        sequential ? data::MaskedLmBatcher::sequential(std::move(ids), b, t, seed, tokens, masking)
                   : data::MaskedLmBatcher(std::move(ids), b, t, seed, tokens, masking));
  } else {
    TF_CHECK_INPUT(ids.size() > t, "the text has ", ids.size(),
                   " tokens, too few for windows of data.seq_len + 1 = ", t + 1);
    causal_ = std::make_unique<data::CausalBatcher>(sequential ? data::CausalBatcher::sequential(std::move(ids), b, t)
                                                               : data::CausalBatcher(std::move(ids), b, t, seed));
  }
}

Batch Batches::next() {
  if (masked_) {
    data::MaskedLmBatch m = masked_->next();
    return {m.inputs, m.targets, m.attention_mask};
  }
  data::CausalBatch c = causal_->next();
  return {c.inputs, c.targets, Tensor()};
}

bool Batches::done() const { return masked_ ? masked_->done() : causal_->done(); }
void Batches::rewind() { masked_ ? masked_->rewind() : causal_->rewind(); }
data::BatcherState Batches::state() const { return masked_ ? masked_->state() : causal_->state(); }
void Batches::restore(const data::BatcherState& s) { masked_ ? masked_->restore(s) : causal_->restore(s); }

Run build_run(const Recipe& recipe, std::unique_ptr<data::Tokenizer> tokenizer, DType dtype) {
  Run run;
  run.recipe = recipe;
  run.recipe.model.vocab_size = tokenizer->vocab_size();
  run.tokenizer = std::move(tokenizer);
  const uint64_t seed = static_cast<uint64_t>(recipe.train.seed);
  layers::Init init{Rng(seed), dtype};
  run.model = layers::build_model(run.recipe.model, init);
  run.params = run.model->parameters();
  run.dropout_rng = Rng(seed).fork(1);

  run.optimizer = optim::make_optimizer(optimizer_params(run.params, recipe.optim), recipe.optim);
  run.schedule = run_schedule(recipe, recipe.train.steps);
  return run;
}

std::vector<optim::ParamRef> optimizer_params(const layers::ParamList& params, const OptimConfig& o) {
  std::vector<optim::ParamRef> refs;
  for (const layers::NamedParam& p : params) {
    bool decay = true;
    if (p.kind == layers::ParamKind::bias || p.kind == layers::ParamKind::norm) decay = o.decay_biases_and_norms;
    if (p.kind == layers::ParamKind::embedding) decay = o.decay_embeddings;
    // The GPT's output head is a ParamKind::weight like any linear layer's (its decay is a weight's);
    // its checkpoint name, fixed by the PyTorch convention and read by the exports, tells it apart.
    const bool hidden_matrix =
        p.kind == layers::ParamKind::weight && p.tensor.rank() == 2 && p.name != "lm_head.weight";
    refs.push_back({p.name, p.tensor, decay, hidden_matrix});
  }
  return refs;
}

// Note [independent streams]
// Everything random in a run comes from train.seed through Philox generators, and no two consumers
// may read the same draws. The initialisation reads Rng(seed) from counter 0 on (2 draws per
// weight); dropout reads Rng(seed).fork(1); the training batcher reads Rng(seed).fork(2). Until
// issue 20 the batcher read Rng(seed) too, so window k's start was floor(u_k (n - T)) with u_k the
// very draw that had set the radius or angle of weight k / 2 of token_embedding (then
// position_embedding): the data order was a function of the initial weights. On
// recipes/gpt_brown_char.yaml, decoupling moved the mean of 3 seeds from 2.3708 to 2.3702 bits/char
// (2.3672 when emulated with --init-from), within seed noise (docs/training.md): a correctness fix,
// not a measured gain. Checkpoints store
// the batcher's seed, so a run resumed from an older checkpoint keeps the windows it started with.
uint64_t training_batch_seed(int64_t train_seed) { return Rng(static_cast<uint64_t>(train_seed)).fork(2).seed(); }

optim::Schedule run_schedule(const Recipe& recipe, int64_t total_steps) {
  optim::ScheduleOptions s;
  s.kind = optim::parse_schedule_kind(recipe.schedule.kind);
  s.lr = recipe.optim.lr;
  s.min_lr = recipe.schedule.min_lr;
  s.warmup_steps = recipe.schedule.warmup_steps;
  s.decay_steps = total_steps;
  s.cooldown_fraction = recipe.schedule.cooldown_fraction;
  return optim::Schedule(s);
}

SampleOptions recipe_sample_options(const Recipe& recipe) {
  SampleOptions so;
  so.tokens = recipe.sample.tokens;
  so.temperature = recipe.sample.temperature;
  so.top_k = recipe.sample.top_k;
  so.top_p = recipe.sample.top_p;
  so.seed = static_cast<uint64_t>(recipe.train.seed);
  return so;
}

std::vector<int32_t> tokenize(const Run& run, const std::string& text) { return run.tokenizer->encode(text); }

data::CausalBatcher causal_eval_batcher(const Run& run, data::Tokens ids) {
  return data::CausalBatcher::sequential(std::move(ids), run.recipe.train.batch_size, run.recipe.data.seq_len);
}

// Note [evaluation masking]: evaluation corrupts as BERT does (independent positions, 80% [MASK],
// 10% random, 10% kept) whatever the recipe trains with, so that runs trained with different spans
// or shares are scored on the same task; only the rate follows the recipe (or `mask_prob`).
data::MaskedLmBatcher masked_eval_batcher(const Run& run, data::Tokens ids, std::optional<double> mask_prob) {
  const Recipe& r = run.recipe;
  return data::MaskedLmBatcher::sequential(std::move(ids), r.train.batch_size, r.data.seq_len,
                                           static_cast<uint64_t>(r.train.seed) + 1,
                                           data::MaskedLmTokens::from(*run.tokenizer),
                                           {.prob = mask_prob.value_or(r.data.mask_prob)});
}

}  // namespace tf::train

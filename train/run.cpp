// Building a run's parts from a recipe.
#include "train/run.h"

#include "data/bpe_tokenizer.h"
#include "data/brown.h"
#include "data/char_tokenizer.h"
#include "data/dataset.h"
#include "data/text.h"
#include "optim/factory.h"

namespace tf::train {

namespace {
const std::vector<std::string> kBertSpecials = {"[PAD]", "[MASK]", "[CLS]", "[SEP]"};
}

Corpus load_corpus(const DataConfig& d) {
  Corpus c;
  if (d.corpus == "brown") {
    const std::filesystem::path brown = d.brown_dir;
    const data::BrownSplits splits = data::prepare_brown(brown / "raw", brown);
    c.train = data::read_text(splits.train);
    c.val = data::read_text(splits.val);
    c.description = "Brown corpus (" + splits.train.string() + ", " + splits.val.string() + ")";
    return c;
  }
  c.train = data::read_text(d.train_path);
  if (!d.val_path.empty()) {
    c.val = data::read_text(d.val_path);
    c.description = d.train_path + ", validation " + d.val_path;
  } else {
    // The last 10% of the text, cut at a line break when there is one near, so no
    // character is split.
    size_t cut = c.train.size() - c.train.size() / 10;
    const size_t newline = c.train.find('\n', cut);
    if (newline != std::string::npos && newline + 1 < c.train.size()) cut = newline + 1;
    while (cut < c.train.size() && (static_cast<unsigned char>(c.train[cut]) & 0xC0) == 0x80) ++cut;
    c.val = c.train.substr(cut);
    c.train.resize(cut);
    c.description = d.train_path + " (last 10% held out for validation)";
  }
  TF_CHECK_INPUT(!c.train.empty(), d.train_path, ": the training text is empty");
  return c;
}

std::unique_ptr<data::Tokenizer> train_tokenizer(const DataConfig& d, const std::string& text,
                                                 layers::Architecture arch) {
  const std::vector<std::string> specials = arch == layers::Architecture::bert ? kBertSpecials : std::vector<std::string>{};
  if (d.tokenizer == "bpe")
    return std::make_unique<data::BpeTokenizer>(
        data::BpeTokenizer::train(text, static_cast<int32_t>(d.bpe_vocab_size), specials));
  return std::make_unique<data::CharTokenizer>(data::CharTokenizer::train(text, specials));
}

Batches::Batches(const Recipe& r, const data::Tokenizer& tokenizer, std::vector<int32_t> ids, uint64_t seed,
                 bool sequential) {
  const int64_t b = r.train.batch_size, t = r.data.seq_len;
  if (r.model.arch == layers::Architecture::bert) {
    const auto tokens = data::MaskedLmTokens::from(tokenizer);
    masked_ = std::make_unique<data::MaskedLmBatcher>(
        sequential ? data::MaskedLmBatcher::sequential(std::move(ids), b, t, seed, tokens, r.data.mask_prob)
                   : data::MaskedLmBatcher(std::move(ids), b, t, seed, tokens, r.data.mask_prob));
  } else {
    TF_CHECK_INPUT(static_cast<int64_t>(ids.size()) > t, "the text has ", ids.size(),
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

  const OptimConfig& o = recipe.optim;
  std::vector<optim::ParamRef> refs;
  for (const layers::NamedParam& p : run.params) {
    bool decay = true;
    if (p.kind == layers::ParamKind::bias || p.kind == layers::ParamKind::norm) decay = o.decay_biases_and_norms;
    if (p.kind == layers::ParamKind::embedding) decay = o.decay_embeddings;
    refs.push_back({p.name, p.tensor, decay});
  }
  run.optimizer = optim::make_optimizer(std::move(refs), o);
  run.schedule = run_schedule(recipe, recipe.train.steps);
  return run;
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

std::vector<int32_t> tokenize(const Run& run, const std::string& text) {
  return data::tokenize_cached(text, *run.tokenizer, run.recipe.data.cache_dir).ids;
}

data::CausalBatcher causal_eval_batcher(const Run& run, std::vector<int32_t> ids) {
  return data::CausalBatcher::sequential(std::move(ids), run.recipe.train.batch_size, run.recipe.data.seq_len);
}

data::MaskedLmBatcher masked_eval_batcher(const Run& run, std::vector<int32_t> ids) {
  const Recipe& r = run.recipe;
  return data::MaskedLmBatcher::sequential(std::move(ids), r.train.batch_size, r.data.seq_len,
                                           static_cast<uint64_t>(r.train.seed) + 1,
                                           data::MaskedLmTokens::from(*run.tokenizer), r.data.mask_prob);
}

}  // namespace tf::train

// A training run's parts, built from a recipe: corpus shards, tokenizer, batches, model, optimizer,
// schedule and the run's counters. The trainer, the checkpoint and the commands share them.
//
//   data::PreparedCorpus corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, &std::cout);
//   Run run = build_run(recipe, std::move(corpus.tokenizer));
//   Batches batches(recipe, *run.tokenizer, corpus.train.tokens, training_batch_seed(recipe.train.seed));
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batcher.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "layers/models/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/grad_sync.h"
#include "train/recipe.h"
#include "train/sample.h"

namespace tf::train {

// The recipe's corpus as token shards, prepared on first use and mapped after (data/prepare.h):
// Brown's split files (prepared from brown_dir first), the Linux sources, or data.train_path / data.val_path. `given`
// is the tokenizer of a checkpoint being resumed, fine-tuned or evaluated (its embedding rows are
// those ids); else one is trained, and a BERT's gets [PAD] [MASK] [CLS] [SEP]. `write` false (train
// --dry-run) writes nothing: existing shards are used, else the ids are only counted. Missing data is
// an InputError that says how to get it.
data::PreparedCorpus prepare_recipe_corpus(const DataConfig& data, layers::Architecture arch,
                                           const data::Tokenizer* given, bool write, std::ostream* progress);
// "Brown corpus (<root>/brown/train.txt, <root>/brown/val.txt)" or the files' description.
std::string corpus_description(const DataConfig& data, const data::PreparedCorpus& corpus);
// Paths as messages name them: 'a.txt', or ['a.txt', 'b/'] for more than one.
std::string quoted_paths(const std::vector<std::string>& paths);

// One batch in the form every model takes: (B, T) ids and targets (-100: no loss), and for BERT
// the (B, T) key-padding mask (1 real, 0 padding).
struct Batch {
  Tensor inputs, targets, key_padding;
};

// Batches for a GPT (random windows) or a BERT (masked windows), seeded; resumable by state.
class Batches {
 public:
  // random: seeded windows for training; sequential: every window once, for evaluation.
  Batches(const Recipe& recipe, const data::Tokenizer& tokenizer, data::Tokens ids, uint64_t seed,
          bool sequential = false);
  Batch next();
  bool done() const;
  void rewind();
  data::BatcherState state() const;
  void restore(const data::BatcherState& state);

 private:
  std::unique_ptr<data::CausalBatcher> causal_;
  std::unique_ptr<data::MaskedLmBatcher> masked_;
};

struct Run {
  Recipe recipe;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::unique_ptr<layers::LanguageModel> model;
  layers::ParamList params;                      // the model's, by checkpoint name
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::Schedule schedule{optim::ScheduleOptions{}};
  Rng dropout_rng;          // dropout seeds during training
  int64_t step = 0;         // optimizer steps completed
  int64_t tokens_seen = 0;  // training tokens consumed
  std::string run_id;       // which run the checkpoints belong to (Note [run folders]); "" before run ids
  double elapsed_seconds = 0;  // training wall time before this process, from the checkpoint
  int64_t budget_steps = 0;    // the step count train.time_budget fixed (0: not fixed; Note [time budget])
  std::shared_ptr<GradientSync> grad_sync;  // made by the first train_step (train/grad_sync.h)
  std::shared_ptr<struct SequenceSplit> sequence_split;  // train.sequence_parallel: this rank's share
  std::shared_ptr<class BatchSplit> batch_split;  // made by the first train_step when the threads split rows
  bool batch_split_chosen = false;                // whether the first train_step has decided
  // Whether a step's matmuls multiply in bfloat16 (train.matmul_precision): decided by the trainer, or by
  // the first train_step; empty until then, so that loading a run (sample, eval) never times auto's product.
  std::optional<bool> bf16;
  int64_t total_steps() const { return budget_steps > 0 ? budget_steps : recipe.train.steps; }
};

// A fresh run: the model initialised from recipe.train.seed, step 0. The tokenizer fixes vocab_size.
Run build_run(const Recipe& recipe, std::unique_ptr<data::Tokenizer> tokenizer, DType dtype = DType::f32);

// The optimizer's view of the model's parameters. Weight decay by kind: weights decay; biases and
// norms only with optim.decay_biases_and_norms, embeddings only with optim.decay_embeddings. Hidden
// matrices (what optim.name: muon orthogonalises, optim/muon.h): every 2-D ParamKind::weight but the
// untied output head lm_head.weight, which, like the embedding tables (ParamKind::embedding), maps
// between tokens and the residual stream rather than within it (Jordan et al. 2024 leave both to AdamW).
std::vector<optim::ParamRef> optimizer_params(const layers::ParamList& params, const OptimConfig& optim);

// The seed of the training batcher's generator: a stream of its own, derived from train.seed (Note
// [independent streams] in run.cpp). Not train.seed itself: that is the initialisation's generator.
uint64_t training_batch_seed(int64_t train_seed);

// The learning-rate schedule of the recipe over a run of total_steps (train.steps, or the count a time
// budget fixed).
optim::Schedule run_schedule(const Recipe& recipe, int64_t total_steps);

// Token ids of `text` under the run's tokenizer (a text given on the command line: --text).
std::vector<int32_t> tokenize(const Run& run, const std::string& text);

// The sample a run prints after training: the recipe's sample.* keys, seeded by train.seed.
SampleOptions recipe_sample_options(const Recipe& recipe);

// The batches every evaluation of the run reads (training's validation, `tapeformer eval`, `tapeformer
// heads`): consecutive windows of data.seq_len, train.batch_size at a time; BERT's masking drawn from
// train.seed + 1, so each of them masks the same positions; BERT's own corruption at data.mask_prob
// (or `mask_prob`) whatever the recipe trains with (Note [evaluation masking], run.cpp).
data::CausalBatcher causal_eval_batcher(const Run& run, data::Tokens ids);
data::MaskedLmBatcher masked_eval_batcher(const Run& run, data::Tokens ids, std::optional<double> mask_prob = {});

}  // namespace tf::train

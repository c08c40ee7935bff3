// Recipes: a YAML file -> a typed, validated Recipe, with documented defaults for every key.
//
// A recipe overrides only what differs from the defaults below (docs/recipes.md lists every key
// with its type, default and meaning). Validation happens before any work starts: unknown keys
// (with a "did you mean"), duplicate keys, wrong types, out-of-range values and inconsistent
// combinations, and keys the user wrote that have no effect (train/recipe_inert.h), are InputErrors
// that name the file, line and column, the key, and what was expected; one message lists them all.
// Command-line overrides (`--set optim.lr=3e-4`) are applied to the YAML tree first and
// validated the same way; their errors name the override instead of a line.
//
//   Recipe r = load_recipe("recipes/gpt_brown_char.yaml", {"train.steps=500"});
//   r.model.d_model;                 // 128
//   std::string yaml = r.to_yaml();  // the resolved recipe, every key present
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/models/config.h"
#include "optim/factory.h"

namespace tf::train {

struct DataConfig {
  std::string corpus = "brown";      // "brown" or "linux" (installed by scripts/setup.sh), "files", or
                                     // "tokens" (token files tokenized elsewhere: llm.c's .bin)
  std::string root;                  // "": $TAPEFORMER_DATA, else ~/.cache/tapeformer (data/root.h)
  std::string brown_dir;             // corpus: brown -> raw documents in <brown_dir>/raw; "": <root>/brown
  std::vector<std::string> train_path;  // corpus: files -> UTF-8 files, folders or globs; tokens -> one token file
  std::vector<std::string> val_path;    // corpus: files -> optional; empty: held out from train_path
  int64_t vocab_size = 0;            // corpus: tokens -> ids below it; 0: the largest id in the files + 1
  std::string tokenizer = "char";    // char | bpe
  int64_t bpe_vocab_size = 1024;     // tokenizer: bpe
  int64_t bpe_sample_mb = 64;        // tokenizer: bpe; the merges are learned from at most this much text
  int64_t seq_len = 128;             // tokens per training window
  int64_t seq_len_warmup = 0;       // GPT: steps over which windows grow to seq_len (train/seq_len_warmup.h); 0: off
  int64_t seq_len_start = 0;        // GPT: the first steps' window length; 0: seq_len / 4
  std::string cache_dir;             // the token shards; "": <root>/shards
  double mask_prob = 0.15;           // BERT: fraction of positions chosen for prediction
  double mask_span = 1;              // BERT: mean span length (SpanBERT); 1: positions chosen independently
  double mask_replace_prob = 0.8;    // BERT: of the chosen, the share shown as [MASK]
  double random_replace_prob = 0.1;  // BERT: of the chosen, the share shown as a random token; the rest stay

  // The folders above with their defaults filled in (data/root.h).
  std::filesystem::path root_folder() const;
  std::filesystem::path brown_folder() const;
  std::filesystem::path linux_folder() const;
  std::filesystem::path cache_folder() const;
};

using optim::OptimConfig;  // optim/factory.h: the optim section, beside the table of optimizers

struct ScheduleConfig {
  std::string kind = "cosine";  // constant | cosine | linear | wsd
  int64_t warmup_steps = 100;
  double min_lr = 1e-4;
  double cooldown_fraction = 0.2;  // wsd: share of the steps after warmup spent decaying
};

struct TrainConfig {
  int64_t steps = 2000;
  int64_t batch_size = 16;
  int64_t grad_accum = 1;   // micro-batches per optimizer step
  int64_t batch_warmup = 0;  // steps over which a micro-batch grows from batch_start rows (train/batch_warmup.h)
  int64_t batch_start = 0;   // the first steps' rows; 0: a quarter of batch_size, at least 1
  double grad_clip = 1.0;   // global norm; 0 disables
  int64_t seed = 1337;
  int64_t threads = 0;      // 0: physical cores (OMP_NUM_THREADS wins when set)
  bool anomaly = false;     // name the first op producing a non-finite value
  bool deterministic = false;  // the same bits for any thread count (kernels::DeterministicScope)
  // auto | batch | ops: how the threads share a step, by the batch's rows or within each op
  // (Note [batch-split threads] in train/thread_split.h); auto splits by rows where it can
  std::string thread_split = "auto";
  // off, or contiguous / zigzag: under mpirun every rank holds its chunks of every sequence and
  // attention runs round the ring (docs/distributed.md, "Sequence parallel training")
  std::string sequence_parallel = "off";
  // off, or blocks: each transformer block keeps only its input and runs again during backward
  // (Note [recomputed blocks] in layers/block.cpp): the same numbers, less memory, ~1/4 more time
  std::string recompute = "off";
  // fp32 | bf16 | auto: a step's matmuls multiply operands rounded to bfloat16, accumulating in float32
  // (Note [bfloat16 matmuls] in framework/kernels/onednn.cpp); auto: bf16 where the CPU multiplies it in hardware
  // faster than float32 (timed once per process: Note [when bf16 pays] in framework/kernels/bf16.cpp)
  std::string matmul_precision = "fp32";
  std::string time_budget;  // "" (also written 0 or none) or a duration ("90s", "5m", "1.5h"): the step
                            // count is fixed from the measured speed so the run ends on time (Note [time budget])
};

// Seconds of a duration written as a number and a unit, s, m or h ("90s", "5m", "1.5h"); 0 for "",
// "0" and "none" (no budget); nullopt when it is neither.
std::optional<double> parse_duration(std::string_view text);

struct EvalConfig {
  int64_t interval = 250;   // steps between validation runs; 0 disables
  int64_t batches = 20;     // validation batches per run
};

struct CheckpointConfig {
  std::string dir = "runs/default";  // load_recipe: runs/<recipe file stem> unless the recipe sets it
  int64_t interval = 500;   // steps between checkpoints; the last step always writes one
  int64_t keep = 3;         // checkpoints kept in the run folder
};

struct LogConfig {
  int64_t interval = 10;    // steps between progress lines / metrics records
  bool report = false;      // write report.html into the run folder after training (tools/train.cpp)
};

struct SampleConfig {
  int64_t tokens = 300;     // printed after training (GPT)
  std::string prompt = "The ";
  double temperature = 0.8;
  int64_t top_k = 0;        // 0: off
  double top_p = 1.0;       // 1: off
};

struct Recipe {
  std::string source;  // file the recipe came from ("" when built in code)
  layers::ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  TrainConfig train;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  LogConfig log;
  SampleConfig sample;

  std::string to_yaml() const;  // every key, resolved; parses back to an equal recipe
};

// The candidate nearest to `word` by edit distance, if within max(3, |word| / 3); else "". For "did
// you mean" suggestions (recipe keys, command names).
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// Values a recipe starts from instead of the defaults, for the keys it does not write: a fine-tuning
// run takes its model from the checkpoint's stored recipe (train/fine_tune.h).
struct RecipeBase {
  std::string yaml;                   // a resolved recipe (Recipe::to_yaml)
  std::string source;                 // where it came from, for messages ("runs/x/ckpt_00000020.h5:/recipe")
  std::vector<std::string> prefixes;  // the keys taken from it, by prefix: {"model."}
};

// Parses and validates, reporting every error at once (one a line, then "<n> errors in the recipe";
// a YAML syntax error alone). `overrides` are "section.key=value" strings. A key the user wrote (in
// the file or by --set) that has no effect in the recipe's configuration is an error; a resolved
// recipe's keys (to_yaml writes them all) are not checked for that, its overrides are.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {},
                   const RecipeBase& base = {});
Recipe parse_recipe(const std::string& yaml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {}, const RecipeBase& base = {});

// One documented key of the schema, for docs and --help listings.
struct RecipeKeyDoc {
  std::string key, type, default_value, meaning;
};
std::vector<RecipeKeyDoc> recipe_keys();

}  // namespace tf::train

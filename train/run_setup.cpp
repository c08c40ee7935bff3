// The training run's setup; see run_setup.h.
#include "train/run_setup.h"

#include <unistd.h>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/kernels/bf16.h"
#include "framework/kernels/mode.h"
#include "layers/models/gpt.h"
#include "train/checkpoint.h"
#include "train/continuation.h"
#include "train/evaluate.h"
#include "train/fine_tune.h"
#include "train/interrupt.h"
#include "train/output_path.h"
#include "train/plan.h"
#include "train/progress.h"
#include "train/resume_changes.h"
#include "train/run_folder.h"
#include "train/run_history.h"
#include "train/run.h"
#include "train/sample.h"
#include "train/batch_warmup.h"
#include "train/seq_len_warmup.h"
#include "train/sequence_parallel.h"
#include "train/step.h"
#include "train/thread_split.h"
#include "train/threads.h"

namespace tf::train {

namespace fs = std::filesystem;

// Where the validation text came from, for messages.
std::string validation_source(const DataConfig& d) {
  if (d.corpus == "brown") return (d.brown_folder() / "val.txt").string();
  if (d.corpus == "linux") return "every tenth file of " + d.linux_folder().string();
  if (!d.val_path.empty()) return "data.val_path " + quoted_paths(d.val_path);
  return "the last 10% of data.train_path " + quoted_paths(d.train_path) + (d.corpus == "tokens" ? "'s ids" : "");
}

// Where the training text came from, for messages.
std::string training_source(const DataConfig& d) {
  if (d.corpus == "brown") return (d.brown_folder() / "train.txt").string();
  if (d.corpus == "linux") return d.linux_folder().string();
  if (!d.val_path.empty()) return "data.train_path " + quoted_paths(d.train_path);
  return "the first 90% of data.train_path " + quoted_paths(d.train_path);
}

// Both texts must hold one window of data.seq_len + 1 tokens (a GPT's input and its shifted target;
// validation windows likewise): checked on the token counts before any work, dry runs included, so
// a text that is long in characters but short in BPE tokens is found here too.
void check_token_counts(const Recipe& r, size_t train_tokens, size_t val_tokens) {
  const size_t window = static_cast<size_t>(r.data.seq_len) + 1;
  TF_CHECK_INPUT(r.model.arch != layers::Architecture::gpt || train_tokens >= window, "the training text (",
                 training_source(r.data), ") has ", train_tokens, " tokens, too few for one training window of ",
                 "data.seq_len + 1 = ", window, ": give more training text or lower data.seq_len");
  TF_CHECK_INPUT(r.eval.interval == 0 || val_tokens >= window, "the validation text (", validation_source(r.data),
                 ") has ", val_tokens, " tokens, fewer than one evaluation window of data.seq_len + 1 = ", window,
                 ": give more validation text, lower data.seq_len, or set eval.interval: 0");
}


// The command line's combinations that make no sense, before anything is read.
void check_train_options(const Recipe& given, const Recipe& recipe, const TrainOptions& options, int ranks) {
  check_sequence_parallel(recipe, ranks);
  batch_split_parts(recipe, 1, ranks);  // train.thread_split: batch where it cannot be
  TF_CHECK_INPUT(sequence_parallel(recipe) || recipe.train.grad_accum % ranks == 0,
                 ranks_message(recipe.train.grad_accum, ranks));
  TF_CHECK_INPUT(!(options.resume && options.init_from), "--init-from starts a new run from a checkpoint's weights; "
                 "--resume continues a run: give one of them");
  TF_CHECK_INPUT(options.resume || (!options.branch && options.more_seconds == 0),
                 options.branch ? "--branch" : "--more", " continues a run: give --resume too");
  TF_CHECK_INPUT(!(options.branch && options.overwrite), "--branch continues in a new folder and leaves ",
                 given.checkpoint.dir, " as it is; --overwrite moves that folder's later history aside: give one");
}

StartingPoint starting_point(const Recipe& given, const Recipe& recipe, const TrainOptions& options, std::ostream& out) {
  StartingPoint s;
  if (options.resume)
    s.resume_from = options.resume->empty() ? resume_checkpoint(given.checkpoint.dir) : fs::path(*options.resume);
  if (s.resume_from) {
    check_resumable(*s.resume_from);
    check_resume_changes(*s.resume_from, given, options.accept_changes || options.more_seconds > 0, out);
    s.later = check_resume_folder(recipe.checkpoint.dir, *s.resume_from, options.overwrite, options.branch.has_value());
  }
  if (options.init_from) s.init_from = checkpoint_argument(*options.init_from, "--init-from");
  if (s.init_from) check_fine_tune_changes(*s.init_from, recipe);
  return s;
}

// The corpus as token shards, prepared once (rank 0; the others wait, then map the same files) and
// mapped. A resumed or fine-tuned model keeps its checkpoint's tokenizer: its embedding rows are
// those ids. A dry run writes nothing: it maps existing shards, else only counts the ids.
data::PreparedCorpus prepare_training_data(const Recipe& recipe, const StartingPoint& start, bool dry_run,
                                           dist::Comm& comm, dist::SetupAgreement& setup, std::ostream& out) {
  const bool writer = comm.rank() == 0;
  const std::optional<fs::path>& tokenizer_from = start.resume_from ? start.resume_from : start.init_from;
  const std::unique_ptr<data::Tokenizer> checkpoint_tokenizer_ =
      tokenizer_from ? data::Tokenizer::from_string(checkpoint_tokenizer(*tokenizer_from)) : nullptr;
  const bool write_shards = !dry_run;
  data::PreparedCorpus corpus;
  if (writer) corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, checkpoint_tokenizer_.get(), write_shards, &out);
  setup.so_far();  // rank 0's preparation (or its error) before the others look for the shards
  if (!writer) corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, checkpoint_tokenizer_.get(), false, nullptr);
  TF_CHECK_INPUT(writer || !write_shards || corpus.reused, "rank ", comm.rank(), " does not find the token shards rank 0 "
                 "prepared in ", corpus.folder.string(), ": under mpirun every rank must see data.cache_dir");
  return corpus;
}

// Why the run cannot fit this machine's memory, or "" when it can.
std::string too_large_for_memory(const RunPlan& plan) {
  const double memory = machine_memory_bytes();
  if (memory <= 0 || plan.peak_bytes <= memory) return "";
  return concat("the run needs about ", gibibytes(plan.peak_bytes), " GiB (", plan.parameters,
                " parameters, from model.d_model, model.n_layers, model.d_ff and the vocabulary, with their "
                "gradients and optimizer state; activations from train.batch_size and data.seq_len), more than "
                "this machine's ", gibibytes(memory), " GiB of memory: make the model or the batch smaller "
                "(train --dry-run prints the plan)");
}

// For auto: what decided it, e.g. "; bf16 timed at 0.62x fp32's speed here" (Note [when bf16 pays]).
static std::string bf16_speed(const TrainConfig& train) {
  if (train.matmul_precision != "auto") return "";
  if (!kernels::native_bf16()) return "; this CPU has no bfloat16 instructions";
  const kernels::Bf16Timing& t = kernels::bf16_timing();
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << "; bf16 timed at " << t.fp32_seconds / t.bf16_seconds << "x fp32's speed here";
  return out.str();
}

// train --dry-run: the plan, and what train would refuse (exit 2, after printing the plan).
void dry_run(const Recipe& recipe, const Recipe& planned, const RunPlan& plan, const data::PreparedCorpus& corpus,
             const std::string& corpus_text, int threads, const std::string& too_large, bool refuses_folder,
             const RunFolderContents& earlier, std::ostream& out) {
  out << planned.to_yaml() << "\n" << plan.to_string() << "threads               " << threads << "\n"
      << "openmp waiting        " << describe_wait_policy() << "\n"
      << "matmuls               " << (bf16_matmuls(recipe.train) ? "bf16 operands, float32 sums" : "fp32")
      << " (train.matmul_precision: " << recipe.train.matmul_precision << bf16_speed(recipe.train) << ")\n"
      << "vocabulary            " << planned.model.vocab_size << " (" << planned.data.tokenizer << ")\n"
      << "data                  " << corpus_text << "\n"
      << "tokens                " << corpus.train_count << " training, " << corpus.val_count << " validation\n";
  if (const double budget = parse_duration(recipe.train.time_budget).value_or(0); budget > 0)
    out << "time budget           " << recipe.train.time_budget << " (" << budget << " s of training): after "
        << kBudgetMeasuredSteps << " steps"
        << (recipe.data.seq_len_warmup > 0 && recipe.train.batch_warmup > 0 ? " at the full window length and batch"
            : recipe.data.seq_len_warmup > 0                                ? " at the full window length"
            : recipe.train.batch_warmup > 0                                 ? " at the full batch"
                                                                            : "")
        << " the step count is fixed from their speed so the run ends on time, at most train.steps = "
        << recipe.train.steps << ", and measured again once over the next " << kBudgetRemeasureShare * 100
        << "% of the time\n";
  if (recipe.data.seq_len_warmup > 0)
    out << "windows               " << seq_len_start(recipe.data) << " tokens, growing to " << recipe.data.seq_len
        << " over the first " << recipe.data.seq_len_warmup << " steps (data.seq_len_warmup)\n";
  if (recipe.train.batch_warmup > 0)
    out << "batches               " << batch_start(recipe.train) << " rows, growing to " << recipe.train.batch_size
        << " over the first " << recipe.train.batch_warmup << " steps (train.batch_warmup)\n";
  TF_CHECK_INPUT(too_large.empty(), "--dry-run: train would refuse this run: ", too_large);
  TF_CHECK_INPUT(!refuses_folder, "--dry-run: train would refuse this run: checkpoint.dir '",
                 recipe.checkpoint.dir, "' already holds a run (", earlier.describe(),
                 "): a real run needs --resume, --overwrite or another checkpoint.dir");
}

// Rank 0 creates the run folder's files (a failure before the first checkpoint removes them again,
// through new_files): a branch's start, the later history set aside, recipe.yaml (or the resumed
// run's recipe.resume-<step>.yaml), and metrics.jsonl opened for appending.
std::ofstream open_run_files(const Run& run, const StartingPoint& start, const TrainOptions& options,
                             FilesBeforeFirstCheckpoint& new_files, fs::path& recipe_file, std::ostream& out) {
  const fs::path dir = run.recipe.checkpoint.dir;
  new_files.will_create(dir);
  if (options.branch) {
    new_files.will_create(dir / "metrics.jsonl");
    start_branch(start.resume_from->parent_path(), dir, run.run_id, run.step);
  } else if (start.later) {
    set_aside_later_history(dir, *start.later, out);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  TF_CHECK_INPUT(!ec, "checkpoint.dir '", dir.string(), "': cannot create the run folder: ", ec.message());
  new_files.will_create(dir / "recipe.yaml");
  new_files.will_create(dir / ("recipe.resume-" + std::to_string(run.step) + ".yaml"));
  new_files.will_append(dir / "metrics.jsonl");
  recipe_file = write_run_recipe(dir, run.recipe.to_yaml(), start.resume_from.has_value() && !options.branch, run.step);
  std::ofstream metrics(dir / "metrics.jsonl", std::ios::app);
  TF_CHECK_INPUT(metrics, dir.string(), "/metrics.jsonl: cannot open for writing");
  return metrics;
}

// The run's first lines: model, size, processes, data, and where it starts from.
void print_run_header(const Run& run, const RunPlan& plan, int threads, int ranks, const std::string& corpus_text,
                      const StartingPoint& start, const TrainOptions& options, std::ostream& out) {
  out << "tapeformer: " << (run.recipe.model.arch == layers::Architecture::gpt ? "GPT" : "BERT") << ", "
      << plan.parameters << " parameters, vocabulary " << run.recipe.model.vocab_size << ", "
      << (ranks > 1 ? std::to_string(ranks) + " ranks (mpirun) x " : std::string()) << threads
      << (threads == 1 ? " thread" : " threads") << (ranks > 1 ? " each" : "")
      << threads_origin(run.recipe.train.threads)
      << (batch_split_parts(run.recipe, threads, ranks) > 1 ? " splitting the batch's rows" : "")
      << (run.bf16.value_or(false) ? ", bf16 matmuls" : "") << ", " << corpus_text
      << "\n";
  if (start.resume_from)
    out << (options.branch ? "branching from " : "resuming from ") << start.resume_from->string() << " at step "
        << run.step << (options.branch ? " into " + run.recipe.checkpoint.dir + "/" : std::string()) << "\n";
  if (start.init_from)
    out << "fine-tuning from " << start.init_from->string() << ": its weights and tokenizer; a fresh optimizer, step 0\n";
}


}  // namespace tf::train

// The training loop; see trainer.h.
#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
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
#include "train/sequence_parallel.h"
#include "train/step.h"
#include "train/threads.h"

namespace tf::train {

namespace fs = std::filesystem;

namespace {

// The training loop's process-wide settings, restored on every way out (errors included): Ctrl-C
// handling (train/interrupt.h; a library caller keeps its own handler afterwards), anomaly
// detection and deterministic kernels.
struct LoopScope {
  InterruptScope interrupts;
  kernels::DeterministicScope deterministic;
  LoopScope(bool anomaly, bool deterministic_kernels) : deterministic(deterministic_kernels) {
    set_anomaly_detection(anomaly);
  }
  ~LoopScope() { set_anomaly_detection(false); }
  LoopScope(const LoopScope&) = delete;
  LoopScope& operator=(const LoopScope&) = delete;
};

// Validation: sequential batches over the validation ids (the same ones every time).
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

// Warns once when the training loss climbs to 10 times its best: a diverging run otherwise finishes
// quietly with exit 0 and a useless model. The loss can stay finite while diverging (a
// non-finite one stops the run: Note in train_step).
struct DivergenceWatch {
  double best = std::numeric_limits<double>::infinity();
  bool warned = false;
  std::string check(const Run& run, double loss) {
    best = std::min(best, loss);
    if (warned || !(loss > 10 * best) || best <= 0) return "";
    warned = true;
    const Recipe& r = run.recipe;
    std::ostringstream w;
    w << "warning: step " << run.step << ": the training loss " << loss << " is over 10 times its best, " << best
      << ": the run is diverging. Likely causes: the learning rate (optim.lr " << r.optim.lr << "; try a third of it)"
      << (r.train.grad_clip > 0 ? "" : ", no gradient clipping (train.grad_clip: 0; 1.0 is usual)")
      << (r.schedule.warmup_steps > 0 ? "" : ", no warmup (schedule.warmup_steps: 0)");
    return w.str();
  }
};

struct Validation {
  data::Tokens ids;
  int64_t chars = 0;  // code points of the validation text, for bits per character

  EvalResult run(const Run& run) const {
    const Recipe& r = run.recipe;
    if (r.model.arch == layers::Architecture::bert) {
      auto batcher = masked_eval_batcher(run, ids);
      return evaluate_masked(*run.model, batcher, r.eval.batches);
    }
    auto batcher = causal_eval_batcher(run, ids);
    return evaluate_causal(*run.model, batcher, r.eval.batches, chars);
  }

  // What the same figure is for models that ignore context (RunReport::baseline, own_token_baseline).
  void set_baselines(const Run& run, RunReport& report) const {
    if (run.recipe.model.arch == layers::Architecture::gpt) {
      report.baseline = unigram_bits_per_char(*run.tokenizer, ids);
      return;
    }
    auto batcher = masked_eval_batcher(run, ids);
    const MaskedBaselines b = masked_baselines(batcher, run.recipe.eval.batches);
    report.baseline = b.most_frequent_accuracy;
    report.own_token_baseline = b.own_token_accuracy;
  }
};

}  // namespace

// Note [time budget]
// ~~~~~~~~~~~~~~~~~~~
// train.time_budget fixes the step count once, from measured speed, so that the learning-rate
// schedule (warmup, then decay over the whole run) ends when the time does. A fresh run trains with
// train.steps as the horizon; its steps 3 to 10 (after the first two, which pay for allocation and
// oneDNN's primitives) give the seconds per step, one evaluation is timed, and the count becomes
// step + floor(remaining / (seconds per step + seconds per evaluation / eval.interval)), at most
// train.steps (budget_total_steps). The schedule is rebuilt over that count: steps already taken
// are unchanged when they were warmup steps, and the first ten steps' decay, if any, used the
// longer horizon. The count is written into every checkpoint (/budget_steps), so --resume continues
// to the same count and stays bit-exact; it is not measured again. Setup before the first step and
// the sample after the last are not counted.
int64_t budget_total_steps(const BudgetMeasure& m) {
  const double per_step = m.step_seconds + (m.eval_interval > 0 ? m.eval_seconds / m.eval_interval : 0.0);
  const double remaining = m.budget_seconds - m.elapsed_seconds;
  const double more = per_step > 0 ? std::floor(std::max(0.0, remaining) / per_step) : 0.0;
  return std::clamp<int64_t>(m.step + static_cast<int64_t>(std::min(more, 1e15)), m.step, m.max_steps);
}

TrainSummary train(const Recipe& given, const TrainOptions& options) {
  // Under mpirun (docs/distributed.md) every rank runs this function; rank 0 alone prints and writes
  // files. Setup runs under an agreement, so bad input stops every rank with one message.
  dist::Comm& comm = dist::Comm::world();
  const bool writer = comm.rank() == 0;
  std::ostream silent(nullptr);
  std::ostream& out = !writer ? silent : options.out ? *options.out : std::cout;
  dist::SetupAgreement setup(comm);
  // --branch continues the run in another folder: that folder is the run's checkpoint.dir from here.
  Recipe branched = given;
  if (options.branch) branched.checkpoint.dir = *options.branch;
  const Recipe& recipe = branched;
  const int threads = configure_threads(recipe.train.threads);
  const fs::path dir = recipe.checkpoint.dir;
  check_sequence_parallel(recipe, comm.size());
  TF_CHECK_INPUT(sequence_parallel(recipe) || recipe.train.grad_accum % comm.size() == 0,
                 ranks_message(recipe.train.grad_accum, comm.size()));
  TF_CHECK_INPUT(!(options.resume && options.init_from), "--init-from starts a new run from a checkpoint's weights; "
                 "--resume continues a run: give one of them");
  TF_CHECK_INPUT(options.resume || (!options.branch && options.more_seconds == 0),
                 options.branch ? "--branch" : "--more", " continues a run: give --resume too");
  TF_CHECK_INPUT(!(options.branch && options.overwrite), "--branch continues in a new folder and leaves ",
                 given.checkpoint.dir, " as it is; --overwrite moves that folder's later history aside: give one");

  // Everything about the run folder and the checkpoints is checked before the data is read: first
  // that the folders the run writes can be created (train/output_path.h).
  check_output_folder(options.branch ? "train --branch" : "checkpoint.dir", dir);
  if (!options.dry_run) check_output_folder("data.cache_dir", recipe.data.cache_folder());
  std::optional<fs::path> resume_from;
  if (options.resume)
    resume_from = options.resume->empty() ? resume_checkpoint(given.checkpoint.dir) : fs::path(*options.resume);
  std::optional<LaterHistory> later;  // this run's history in dir past the resume step
  if (resume_from) {
    check_resumable(*resume_from);
    check_resume_changes(*resume_from, given, options.accept_changes || options.more_seconds > 0, out);
    later = check_resume_folder(dir, *resume_from, options.overwrite, options.branch.has_value());
  }
  std::optional<fs::path> init_from;
  if (options.init_from) init_from = checkpoint_argument(*options.init_from, "--init-from");
  if (init_from) check_fine_tune_changes(*init_from, recipe);
  // A fresh run (or a branch) claims its folder before any work: another run's files are refused or
  // moved aside. Rank 0 alone looks: the others could see the files rank 0 writes below (the setup
  // agreement gives its refusal to every rank).
  const RunFolderContents earlier = run_folder_contents(dir);
  const bool fresh_folder = !resume_from || options.branch;
  if (fresh_folder && !options.dry_run && !options.overwrite && writer) claim_fresh_run_folder(dir, false, out);

  // Data and run: fresh from the recipe, or from a checkpoint (its tokenizer, its state). The corpus
  // is prepared into token shards once (rank 0; the others wait, then map the same files) and mapped.
  // A resumed or fine-tuned model keeps its checkpoint's tokenizer: its embedding rows are those ids.
  const std::optional<fs::path>& tokenizer_from = resume_from ? resume_from : init_from;
  const std::unique_ptr<data::Tokenizer> checkpoint_tokenizer_ =
      tokenizer_from ? data::Tokenizer::from_string(checkpoint_tokenizer(*tokenizer_from)) : nullptr;
  // A dry run writes nothing: it maps existing shards, else only counts the ids.
  const bool write_shards = !options.dry_run;
  data::PreparedCorpus corpus;
  if (writer) corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, checkpoint_tokenizer_.get(), write_shards, &out);
  setup.so_far();  // rank 0's preparation (or its error) before the others look for the shards
  if (!writer) corpus = prepare_recipe_corpus(recipe.data, recipe.model.arch, checkpoint_tokenizer_.get(), false, nullptr);
  TF_CHECK_INPUT(writer || !write_shards || corpus.reused, "rank ", comm.rank(), " does not find the token shards rank 0 "
                 "prepared in ", corpus.folder.string(), ": under mpirun every rank must see data.cache_dir");
  std::unique_ptr<data::Tokenizer> tokenizer = std::move(corpus.tokenizer);
  const std::string corpus_text = corpus_description(recipe.data, corpus);
  // The plan comes from the recipe alone (the model's parameter shapes, nothing allocated), so a
  // dry run of a model too large for the machine prints its estimate instead of failing to build it.
  Recipe planned = recipe;
  planned.model.vocab_size = tokenizer->vocab_size();
  const int64_t shard_bytes = (corpus.train_count + corpus.val_count) * data::token_width(tokenizer->vocab_size());
  const RunPlan plan = plan_run(planned, shard_bytes);
  if (init_from)
    warn_unknown_text(*tokenizer, static_cast<int64_t>(corpus.train.info.unknown), corpus.train_count, *init_from, out);
  check_token_counts(recipe, corpus.train_count, corpus.val_count);
  // A run that cannot fit is refused before anything is allocated (or any earlier run moved aside).
  const double memory = machine_memory_bytes();
  const std::string too_large =
      memory <= 0 || plan.peak_bytes <= memory
          ? ""
          : concat("the run needs about ", gibibytes(plan.peak_bytes), " GiB (", plan.parameters,
                   " parameters, from model.d_model, model.n_layers, model.d_ff and the vocabulary, with their "
                   "gradients and optimizer state; activations from train.batch_size and data.seq_len), more than "
                   "this machine's ", gibibytes(memory), " GiB of memory: make the model or the batch smaller "
                   "(train --dry-run prints the plan)");
  if (options.dry_run) {
    out << planned.to_yaml() << "\n" << plan.to_string() << "threads               " << threads << "\n"
        << "openmp waiting        " << describe_wait_policy() << "\n"
        << "vocabulary            " << planned.model.vocab_size << " (" << planned.data.tokenizer << ")\n"
        << "data                  " << corpus_text << "\n"
        << "tokens                " << corpus.train_count << " training, " << corpus.val_count << " validation\n";
    if (const double budget = parse_duration(recipe.train.time_budget).value_or(0); budget > 0)
      out << "time budget           " << recipe.train.time_budget << " (" << budget << " s of training): after "
          << kBudgetMeasuredSteps << " steps the step count is fixed from their speed so the run ends on time, "
          << "at most train.steps = " << recipe.train.steps << "\n";
    // What train would refuse, the dry run refuses too (exit 2), after printing the plan.
    TF_CHECK_INPUT(too_large.empty(), "--dry-run: train would refuse this run: ", too_large);
    TF_CHECK_INPUT(!fresh_folder || options.overwrite || earlier.empty() || earlier.checkpoints.empty(),
                   "--dry-run: train would refuse this run: checkpoint.dir '", dir.string(), "' already holds a run (",
                   earlier.describe(), "): a real run needs --resume, --overwrite or another checkpoint.dir");
    return {};
  }
  TF_CHECK_INPUT(too_large.empty(), too_large);
  if (fresh_folder && options.overwrite && writer) claim_fresh_run_folder(dir, true, out);
  Run run = build_run(recipe, std::move(tokenizer));
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, training_batch_seed(recipe.train.seed));
  double budget = parse_duration(run.recipe.train.time_budget).value_or(0);  // 0: none, or its count is fixed
  if (resume_from) {
    batches.restore(load_checkpoint_into(run, *resume_from));
    const Recipe stored = parse_recipe(checkpoint_recipe(*resume_from), resume_from->string() + ":/recipe");
    budget = continue_run(run, stored, resume_from->string(), options.more_seconds, out);
  }
  if (init_from) load_weights(run, *init_from);  // weights only: the optimizer and step start afresh
  const Validation validation{corpus.val.tokens, static_cast<int64_t>(corpus.val.info.characters)};
  if (options.before_training) options.before_training(run);

  if (!resume_from) run.run_id = new_run_id();
  FilesBeforeFirstCheckpoint new_files;  // a failure before the first checkpoint leaves the folder as it was
  fs::path recipe_file;
  std::ofstream metrics;  // closed before new_files acts
  if (writer) {
    new_files.will_create(dir);
    if (options.branch) {
      new_files.will_create(dir / "metrics.jsonl");
      start_branch(resume_from->parent_path(), dir, run.run_id, run.step);
    }
    else if (later) set_aside_later_history(dir, *later, out);
    std::error_code ec;
    fs::create_directories(dir, ec);
    TF_CHECK_INPUT(!ec, "checkpoint.dir '", dir.string(), "': cannot create the run folder: ", ec.message());
    new_files.will_create(dir / "recipe.yaml");
    new_files.will_create(dir / ("recipe.resume-" + std::to_string(run.step) + ".yaml"));
    new_files.will_append(dir / "metrics.jsonl");
    recipe_file = write_run_recipe(dir, run.recipe.to_yaml(), resume_from.has_value() && !options.branch, run.step);
    metrics.open(dir / "metrics.jsonl", std::ios::app);
    TF_CHECK_INPUT(metrics, dir.string(), "/metrics.jsonl: cannot open for writing");
  }

  out << "tapeformer: " << (run.recipe.model.arch == layers::Architecture::gpt ? "GPT" : "BERT") << ", "
      << plan.parameters << " parameters, vocabulary " << run.recipe.model.vocab_size << ", "
      << (comm.size() > 1 ? std::to_string(comm.size()) + " ranks (mpirun) x " : std::string()) << threads
      << (threads == 1 ? " thread" : " threads") << (comm.size() > 1 ? " each" : "")
      << threads_origin(run.recipe.train.threads) << ", " << corpus_text << "\n";
  if (resume_from)
    out << (options.branch ? "branching from " : "resuming from ") << resume_from->string() << " at step " << run.step
        << (options.branch ? " into " + dir.string() + "/" : std::string()) << "\n";
  if (init_from)
    out << "fine-tuning from " << init_from->string() << ": its weights and tokenizer; a fresh optimizer, step 0\n";

  // Until the loop ends: Ctrl-C writes a checkpoint; anomaly mode checks every op.
  std::optional<LoopScope> loop_scope(std::in_place, run.recipe.train.anomaly, run.recipe.train.deterministic);
  if (!options.profile.empty()) {
    profile::reset();
    profile::enable(true, options.profile == "cpu" ? profile::Clock::cpu : profile::Clock::wall);
  }
  // Ranks' output under mpirun goes through mpirun, often to a log: plain lines, no redrawing.
  Progress progress(out, run.total_steps(), isatty(fileno(stdout)) && options.out == nullptr && comm.size() == 1);
  double measure_from = 0;  // elapsed() when the measured steps began
  layers::Context ctx{true, &run.dropout_rng, nullptr};
  ctx.recompute = run.recipe.train.recompute == "blocks";
  const int64_t tokens_per_step = run.recipe.train.grad_accum * run.recipe.train.batch_size * run.recipe.data.seq_len;
  TrainSummary summary;
  summary.final_step = run.step;
  std::optional<EvalResult> last_eval;

  const double elapsed_before = run.elapsed_seconds;  // training time of earlier processes of this run
  auto elapsed = [&] { return elapsed_before + progress.elapsed_seconds(); };
  auto write_checkpoint = [&] {
    const fs::path file = checkpoint_path(dir, run.step);
    run.elapsed_seconds = elapsed();
    if (writer) {
      {
        WritingCheckpoint writing(file);  // a second Ctrl-C meanwhile removes the partial file
        save_run_checkpoint(run, batches.state(), file);
      }
      new_files.checkpoint_written();
      prune_run_checkpoints(dir, run.recipe.checkpoint.keep, run.run_id);
    }
    summary.last_checkpoint = file.string();
  };
  setup.succeeded();  // from here on an error stops its own rank, and mpirun the others

  DivergenceWatch divergence;
  while (run.step < run.total_steps()) {
    const double lr = run.schedule.lr_at(run.step);
    const StepResult step = train_step(run, batches, ctx);
    const double loss = step.loss, grad_norm = step.grad_norm;
    ++summary.steps_done;
    summary.last_loss = loss;
    if (const std::string w = divergence.check(run, loss); !w.empty()) progress.note(w);

    // Note [time budget]: steps 3 .. 10 of this process measure the speed, then the count is fixed.
    if (budget > 0 && run.budget_steps == 0) {
      if (summary.steps_done == kBudgetWarmSteps) measure_from = elapsed();
      if (summary.steps_done == kBudgetMeasuredSteps && run.step < run.recipe.train.steps) {
        const double step_seconds = (elapsed() - measure_from) / (kBudgetMeasuredSteps - kBudgetWarmSteps);
        double eval_seconds = 0;
        if (run.recipe.eval.interval > 0) {  // one evaluation, timed and discarded
          const double before = elapsed();
          validation.run(run);
          eval_seconds = elapsed() - before;
        }
        run.budget_steps = budget_total_steps({budget, elapsed(), step_seconds, eval_seconds, run.recipe.eval.interval,
                                               run.step, run.recipe.train.steps});
        run.budget_steps = comm.allreduce_max(writer ? run.budget_steps : 0);  // rank 0's count for all
        TF_CHECK_INPUT(run.budget_steps >= run.recipe.schedule.warmup_steps, "train.time_budget ",
                       run.recipe.train.time_budget, " pays for ", run.budget_steps, " steps at the measured ",
                       step_seconds, " s per step, fewer than schedule.warmup_steps = ", run.recipe.schedule.warmup_steps,
                       ": the learning rate would never finish warming up. Give a longer train.time_budget or fewer "
                       "schedule.warmup_steps (nothing was kept: the run wrote no checkpoint)");
        run.schedule = run_schedule(run.recipe, run.budget_steps);
        progress.set_total(run.budget_steps);
        progress.note("time budget " + (options.more_seconds > 0 ? concat(std::lround(budget), " s in all (--more)")
                                                                 : run.recipe.train.time_budget) +
                      ": " + std::to_string(step_seconds).substr(0, 6) +
                      " s per step" + (eval_seconds > 0 ? ", " + std::to_string(eval_seconds).substr(0, 5) + " s per evaluation" : "") +
                      ": training for " + std::to_string(run.budget_steps) + " steps");
      }
    }
    const bool last = run.step == run.total_steps();
    double val_loss = -1;
    EvalResult eval_now;  // this step's evaluation; NaN figures (written as null) when there is none
    eval_now.loss = eval_now.perplexity = std::numeric_limits<double>::quiet_NaN();
    if (run.recipe.eval.interval > 0 && (run.step % run.recipe.eval.interval == 0 || last)) {
      profile::Scope scope("evaluation");
      const EvalResult e = validation.run(run);
      last_eval = e;
      eval_now = e;
      val_loss = e.loss;
      summary.last_val_loss = e.loss;
      progress.report_eval(run.step, e);
    }
    progress.update(run.step, loss, lr, tokens_per_step);
    // Whether to stop after this step, read once, as late as the step's log allows: a signal may land at any moment, and every rank
    // must act on the same answer (one reading the flag again could leave the others waiting in
    // the next step's collectives). A Ctrl-C on any rank stops them all.
    bool stop = interrupt_requested();
    if (comm.size() > 1) stop = comm.allreduce_max(stop ? 1 : 0) != 0;
    if (writer && (run.step % run.recipe.log.interval == 0 || last || stop || val_loss >= 0)) {
      metrics << "{\"step\": " << run.step << ", \"train_loss\": " << json_number(loss) << ", \"val_loss\": "
              << (val_loss >= 0 ? json_number(val_loss) : "null") << ", \"lr\": " << json_number(lr)
              << ", \"val_perplexity\": " << json_number(eval_now.perplexity) << ", \"val_bits_per_char\": "
              << json_number(eval_now.bits_per_char) << ", \"val_mlm_accuracy\": " << json_number(eval_now.mlm_accuracy)
              << ", \"grad_norm\": " << json_number(grad_norm) << ", \"tokens_per_s\": " << progress.tokens_per_second()
              << ", \"elapsed_s\": " << elapsed() << ", \"run\": \"" << run.run_id << "\"}\n";
      metrics.flush();
    }
    const bool interval = run.recipe.checkpoint.interval > 0 && run.step % run.recipe.checkpoint.interval == 0;
    if (interval || last || stop) write_checkpoint();
    if (stop) {
      progress.finish();
      out << "interrupted: checkpoint written to " << summary.last_checkpoint << " at step " << run.step
          << "; continue with --resume\n";
      summary.interrupted = true;
      summary.stop_signal = interrupt_signal();
      break;
    }
  }
  loop_scope.reset();
  progress.finish();
  if (!options.profile.empty()) {
    profile::enable(false);
    out << "\nprofile (" << options.profile << " clock, " << summary.steps_done << " steps; forward time of an op = time since the previous op):\n"
        << profile::report();
  }
  summary.final_step = run.step;
  summary.tokens_per_second = progress.tokens_per_second();

  if (writer && !summary.interrupted && options.sample_at_end && run.recipe.sample.tokens > 0 &&
      run.recipe.model.arch == layers::Architecture::gpt) {
    const auto& gpt = dynamic_cast<const layers::Gpt&>(*run.model);
    const SampleOptions so = recipe_sample_options(run.recipe);
    out << "\nsample (" << so.tokens << " tokens, temperature " << so.temperature << "):\n"
        << run.recipe.sample.prompt;
    std::vector<int32_t> generated;
    sample(gpt, run.tokenizer->encode(run.recipe.sample.prompt), so, [&](int32_t id) { generated.push_back(id); });
    out << run.tokenizer->decode(generated) << "\n";
  }

  RunReport report;
  report.steps_done = summary.steps_done;
  report.wall_seconds = progress.elapsed_seconds();
  report.tokens_per_second = summary.tokens_per_second;
  report.threads = threads;
  report.ranks = comm.size();
  report.causal = run.recipe.model.arch == layers::Architecture::gpt;
  report.last_eval = last_eval;
  if (last_eval && writer) validation.set_baselines(run, report);
  report.program = options.program;
  report.checkpoint_dir = dir.string();
  report.last_checkpoint = summary.last_checkpoint;
  report.recipe_path = recipe_file.string();
  report.prompt = run.recipe.sample.prompt;
  report.interrupted = summary.interrupted;
  if (writer) print_run_report(out, report);
  return summary;
}

}  // namespace tf::train

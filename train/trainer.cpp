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
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/dist/comm.h"
#include "framework/kernels/mode.h"
#include "layers/models/gpt.h"
#include "train/time_budget.h"
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
#include "train/run_setup.h"
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

// Validation: sequential batches over the validation ids (the same ones every time).
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


// One line of metrics.jsonl.
void write_metrics_line(std::ofstream& metrics, const Run& run, double loss, double val_loss, double lr,
                        const EvalResult& eval_now, double grad_norm, double tokens_per_second, double elapsed) {
  metrics << "{\"step\": " << run.step << ", \"train_loss\": " << json_number(loss) << ", \"val_loss\": "
          << (val_loss >= 0 ? json_number(val_loss) : "null") << ", \"lr\": " << json_number(lr)
          << ", \"val_perplexity\": " << json_number(eval_now.perplexity) << ", \"val_bits_per_char\": "
          << json_number(eval_now.bits_per_char) << ", \"val_mlm_accuracy\": " << json_number(eval_now.mlm_accuracy)
          << ", \"grad_norm\": " << json_number(grad_norm) << ", \"tokens_per_s\": " << tokens_per_second
          << ", \"elapsed_s\": " << elapsed << ", \"run\": \"" << run.run_id << "\"}\n";
  metrics.flush();
}

// The GPT's sample after the last step (rank 0), from the recipe's prompt.
void sample_after_training(const Run& run, std::ostream& out) {
  const auto& gpt = dynamic_cast<const layers::Gpt&>(*run.model);
  const SampleOptions so = recipe_sample_options(run.recipe);
  out << "\nsample (" << so.tokens << " tokens, temperature " << so.temperature << "):\n" << run.recipe.sample.prompt;
  std::vector<int32_t> generated;
  sample(gpt, run.tokenizer->encode(run.recipe.sample.prompt), so, [&](int32_t id) { generated.push_back(id); });
  out << run.tokenizer->decode(generated) << "\n";
}

// The run's closing report (rank 0).
void report_run(const Run& run, const TrainSummary& summary, const Progress& progress, int threads, int ranks,
                const std::optional<EvalResult>& last_eval, const Validation& validation, const TrainOptions& options,
                const fs::path& recipe_file, std::ostream& out) {
  RunReport report;
  report.steps_done = summary.steps_done;
  report.wall_seconds = progress.elapsed_seconds();
  report.tokens_per_second = summary.tokens_per_second;
  report.threads = threads;
  report.ranks = ranks;
  report.causal = run.recipe.model.arch == layers::Architecture::gpt;
  report.last_eval = last_eval;
  if (last_eval) validation.set_baselines(run, report);
  report.program = options.program;
  report.checkpoint_dir = run.recipe.checkpoint.dir;
  report.last_checkpoint = summary.last_checkpoint;
  report.recipe_path = recipe_file.string();
  report.prompt = run.recipe.sample.prompt;
  report.interrupted = summary.interrupted;
  print_run_report(out, report);
}

// What the training loop works with, set up by train().
struct TrainingSession {
  const TrainOptions& options;
  dist::Comm& comm;
  std::ostream& out;
  int threads;
  Run& run;
  Batches& batches;
  const Validation& validation;
  FilesBeforeFirstCheckpoint& new_files;  // a failure before the first checkpoint leaves the folder as it was
  std::ofstream& metrics;                 // rank 0's metrics.jsonl
  const fs::path& recipe_file;
  double budget;                          // train.time_budget in seconds; 0: none, or its count is fixed
  dist::SetupAgreement& setup;
};

// The steps, with evaluations, metrics, checkpoints and a stop on Ctrl-C; then the sample and the
// report.
TrainSummary train_loop(TrainingSession& s) {
  const TrainOptions& options = s.options;
  dist::Comm& comm = s.comm;
  std::ostream& out = s.out;
  Run& run = s.run;
  const bool writer = comm.rank() == 0;
  const fs::path dir = run.recipe.checkpoint.dir;
  // Until the loop ends: Ctrl-C writes a checkpoint; anomaly mode checks every op.
  std::optional<LoopScope> loop_scope(std::in_place, run.recipe.train.anomaly, run.recipe.train.deterministic);
  if (!options.profile.empty()) {
    profile::reset();
    profile::enable(true, options.profile == "cpu" ? profile::Clock::cpu : profile::Clock::wall);
  }
  // Ranks' output under mpirun goes through mpirun, often to a log: plain lines, no redrawing.
  Progress progress(out, run.total_steps(), isatty(fileno(stdout)) && options.out == nullptr && comm.size() == 1);
  layers::Context ctx{true, &run.dropout_rng, nullptr};
  ctx.recompute = run.recipe.train.recompute == "blocks";
  TrainSummary summary;
  summary.final_step = run.step;
  std::optional<EvalResult> last_eval;

  const double elapsed_before = run.elapsed_seconds;  // training time of earlier processes of this run
  const std::function<double()> elapsed = [&] { return elapsed_before + progress.elapsed_seconds(); };
  TimeBudget budget(s.budget, {comm, progress, elapsed,
                               [&] {
                                 const double before = elapsed();
                                 s.validation.run(run);
                                 return elapsed() - before;
                               },
                               options.more_seconds});
  auto write_checkpoint = [&] {
    const fs::path file = checkpoint_path(dir, run.step);
    run.elapsed_seconds = elapsed();
    if (writer) {
      {
        WritingCheckpoint writing(file);  // a second Ctrl-C meanwhile removes the partial file
        save_run_checkpoint(run, s.batches.state(), file);
      }
      s.new_files.checkpoint_written();
      prune_run_checkpoints(dir, run.recipe.checkpoint.keep, run.run_id);
    }
    budget.checkpoint_written();
    summary.last_checkpoint = file.string();
  };
  s.setup.succeeded();  // from here on an error stops its own rank, and mpirun the others

  DivergenceWatch divergence;
  while (run.step < run.total_steps()) {
    const double lr = run.schedule.lr_at(run.step);
    const double step_began = elapsed();
    const StepResult step = train_step(run, s.batches, ctx);
    const double step_seconds = elapsed() - step_began;
    ++summary.steps_done;
    summary.last_loss = step.loss;
    if (const std::string w = divergence.check(run, step.loss); !w.empty()) progress.note(w);
    budget.after_step(run, step_seconds, summary.steps_done);  // Note [time budget]
    const bool last = run.step == run.total_steps();
    double val_loss = -1;
    EvalResult eval_now;  // this step's evaluation; NaN figures (written as null) when there is none
    eval_now.loss = eval_now.perplexity = std::numeric_limits<double>::quiet_NaN();
    if (run.recipe.eval.interval > 0 && (run.step % run.recipe.eval.interval == 0 || last)) {
      profile::Scope scope("evaluation");
      eval_now = s.validation.run(run);
      last_eval = eval_now;
      val_loss = eval_now.loss;
      summary.last_val_loss = eval_now.loss;
      progress.report_eval(run.step, eval_now);
    }
    progress.update(run.step, step.loss, lr, step.tokens);
    // Whether to stop after this step, read once, as late as the step's log allows: a signal may land at any moment, and every rank
    // must act on the same answer (one reading the flag again could leave the others waiting in
    // the next step's collectives). A Ctrl-C on any rank stops them all.
    bool stop = interrupt_requested();
    if (comm.size() > 1) stop = comm.allreduce_max(stop ? 1 : 0) != 0;
    if (writer && (run.step % run.recipe.log.interval == 0 || last || stop || val_loss >= 0))
      write_metrics_line(s.metrics, run, step.loss, val_loss, lr, eval_now, step.grad_norm, progress.tokens_per_second(),
                         elapsed());
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
      run.recipe.model.arch == layers::Architecture::gpt)
    sample_after_training(run, out);
  if (writer) report_run(run, summary, progress, s.threads, comm.size(), last_eval, s.validation, options, s.recipe_file, out);
  return summary;
}

}  // namespace

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
  check_train_options(given, recipe, options, comm.size());

  // Everything about the run folder and the checkpoints is checked before the data is read: first
  // that the folders the run writes can be created (train/output_path.h).
  check_output_folder(options.branch ? "train --branch" : "checkpoint.dir", dir);
  if (!options.dry_run) check_output_folder("data.cache_dir", recipe.data.cache_folder());
  const StartingPoint start = starting_point(given, recipe, options, out);
  // A fresh run (or a branch) claims its folder before any work: another run's files are refused or
  // moved aside. Rank 0 alone looks: the others could see the files rank 0 writes below (the setup
  // agreement gives its refusal to every rank).
  const RunFolderContents earlier = run_folder_contents(dir);
  const bool fresh_folder = !start.resume_from || options.branch;
  if (fresh_folder && !options.dry_run && !options.overwrite && writer) claim_fresh_run_folder(dir, false, out);

  data::PreparedCorpus corpus = prepare_training_data(recipe, start, options.dry_run, comm, setup, out);
  std::unique_ptr<data::Tokenizer> tokenizer = std::move(corpus.tokenizer);
  const std::string corpus_text = corpus_description(recipe.data, corpus);
  // The plan comes from the recipe alone (the model's parameter shapes, nothing allocated), so a
  // dry run of a model too large for the machine prints its estimate instead of failing to build it.
  Recipe planned = recipe;
  planned.model.vocab_size = tokenizer->vocab_size();
  const int64_t shard_bytes = (corpus.train_count + corpus.val_count) * data::token_width(tokenizer->vocab_size());
  const RunPlan plan = plan_run(planned, shard_bytes);
  if (start.init_from)
    warn_unknown_text(*tokenizer, static_cast<int64_t>(corpus.train.info.unknown), corpus.train_count, *start.init_from, out);
  check_token_counts(recipe, corpus.train_count, corpus.val_count);
  // A run that cannot fit is refused before anything is allocated (or any earlier run moved aside).
  const std::string too_large = too_large_for_memory(plan);
  if (options.dry_run) {
    dry_run(recipe, planned, plan, corpus, corpus_text, threads, too_large,
            fresh_folder && !options.overwrite && !earlier.empty() && !earlier.checkpoints.empty(), earlier, out);
    return {};
  }
  TF_CHECK_INPUT(too_large.empty(), too_large);
  if (fresh_folder && options.overwrite && writer) claim_fresh_run_folder(dir, true, out);
  Run run = build_run(recipe, std::move(tokenizer));
  Batches batches(run.recipe, *run.tokenizer, corpus.train.tokens, training_batch_seed(recipe.train.seed));
  double budget = parse_duration(run.recipe.train.time_budget).value_or(0);  // 0: none, or its count is fixed
  if (start.resume_from) {
    batches.restore(load_checkpoint_into(run, *start.resume_from));
    const Recipe stored = parse_recipe(checkpoint_recipe(*start.resume_from), start.resume_from->string() + ":/recipe");
    budget = continue_run(run, stored, start.resume_from->string(), options.more_seconds, out);
  }
  if (start.init_from) load_weights(run, *start.init_from);  // weights only: the optimizer and step start afresh
  // auto's timing (Note [when bf16 pays]) is each process's own: under mpirun rank 0's choice holds for all.
  run.bf16 = bf16_matmuls(run.recipe.train);
  if (comm.size() > 1) {
    std::string bf16 = *run.bf16 ? "bf16" : "fp32";
    comm.broadcast(bf16);
    run.bf16 = bf16 == "bf16";
  }
  const Validation validation{corpus.val.tokens, static_cast<int64_t>(corpus.val.info.characters)};
  if (options.before_training) options.before_training(run);

  if (!start.resume_from) run.run_id = new_run_id();
  FilesBeforeFirstCheckpoint new_files;  // a failure before the first checkpoint leaves the folder as it was
  fs::path recipe_file;
  std::ofstream metrics;  // closed before new_files acts
  if (writer) metrics = open_run_files(run, start, options, new_files, recipe_file, out);
  print_run_header(run, plan, threads, comm.size(), corpus_text, start, options, out);

  TrainingSession session{options, comm, out, threads, run, batches, validation, new_files, metrics, recipe_file,
                          budget, setup};
  return train_loop(session);
}

}  // namespace tf::train

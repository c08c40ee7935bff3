// The training loop: batches -> forward -> loss -> backward -> clip -> optimizer step, with
// progress, evaluation, metrics, checkpoints, Ctrl-C handling and exact resume.
//
//   TrainOptions options;
//   options.resume = "";                       // continue from the run folder's newest checkpoint
//   TrainSummary s = train(load_recipe("recipes/gpt_brown_char.yaml"), options);
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <functional>
#include <string>

#include "train/recipe.h"
#include "train/run.h"
#include "train/time_budget.h"

namespace tf::train {

struct TrainOptions {
  bool dry_run = false;                // validate, build, print the plan; train nothing
  std::optional<std::string> resume;   // set: resume; empty string: the newest checkpoint in the run folder
  bool accept_changes = false;         // a resume may change continuable keys (train/resume_changes.h)
  bool overwrite = false;              // a fresh run may move an earlier run's files aside (run_folder.h);
                                       // a resume, the run's history past its step (run_history.h)
  std::optional<std::string> branch;   // with resume: continue in this new run folder instead
  double more_seconds = 0;             // with resume: train this many more seconds (train/continuation.h)
  // Fine-tuning: a fresh run (step 0, a new optimizer, its own run folder) whose model starts from
  // this checkpoint's weights and uses its tokenizer. The recipe's model must be the checkpoint's
  // (train/resume_changes.h: check_fine_tune_changes; train/fine_tune.h: load_fine_tune_recipe takes
  // the model keys a recipe leaves out from the checkpoint); data, optimizer, schedule and steps are free.
  std::optional<std::string> init_from;
  bool sample_at_end = true;           // GPT: print recipe.sample.tokens of text after training
  std::string profile;                 // "wall" or "cpu": print time per op and phase at the end
  std::ostream* out = nullptr;         // progress and reports (default std::cout)
  std::string program = "tapeformer";  // how the user runs the program, for the next commands the report suggests
  // Called once the run is built (and restored, with --resume), before the first step: to inspect or
  // alter it from code, e.g. freeze or poison a parameter in a test.
  std::function<void(Run&)> before_training;
};

struct TrainSummary {
  int64_t steps_done = 0;       // steps run by this call
  int64_t final_step = 0;
  double last_loss = 0;         // mean training loss of the last step
  double last_val_loss = -1;    // -1 when no evaluation ran
  double tokens_per_second = 0;
  bool interrupted = false;     // stopped by SIGINT or SIGTERM after writing a checkpoint
  int stop_signal = 0;          // which one, when interrupted
  std::string last_checkpoint;
};

TrainSummary train(const Recipe& recipe, const TrainOptions& options = {});

}  // namespace tf::train

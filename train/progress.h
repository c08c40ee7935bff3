// The progress display of training: one line redrawn in place on a terminal, plain lines otherwise.
//   step 120/2000  loss 2.3141  lr 1.20e-03  41.2k tok/s  elapsed 0:31  eta 8:05
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "train/evaluate.h"

namespace tf::train {

class Progress {
 public:
  Progress(std::ostream& out, int64_t total_steps, bool terminal);
  void update(int64_t step, double loss, double lr, int64_t tokens_this_step);
  void report_eval(int64_t step, const EvalResult& e);
  void note(const std::string& line);  // a line of its own (a warning), between progress updates
  void finish();  // ends the redrawn line
  double tokens_per_second() const;
  double elapsed_seconds() const;
  void set_total(int64_t total_steps) { total_ = total_steps; }  // a time budget fixed the count

 private:
  std::ostream& out_;
  int64_t total_;
  bool terminal_;
  bool line_open_ = false;
  int64_t tokens_ = 0, first_step_ = -1;
  std::chrono::steady_clock::time_point start_, last_print_;
  // Throughput over the steps after the first (which includes warm-up: allocation, primitives).
  std::chrono::steady_clock::time_point steady_start_;
  int64_t steady_tokens_ = 0;
};

// What a finished (or interrupted) run tells its user last: how good, how fast, where the
// checkpoints are and what to run next.
//   done: 2000 steps in 1:45, 37.2k tokens/s on 2 threads
//   validation: 2.44 bits/char; a context-free (unigram) model needs 4.52
//   checkpoints: runs/gpt_brown_char/ (newest ckpt_00002000.h5)
//   next:
//     build/tools/tapeformer sample runs/gpt_brown_char/ckpt_00002000.h5 --prompt "The " --tokens 200
//     build/tools/tapeformer eval runs/gpt_brown_char/ckpt_00002000.h5
struct RunReport {
  int64_t steps_done = 0;
  double wall_seconds = 0;
  double tokens_per_second = 0;
  int threads = 0;
  int ranks = 1;                        // processes under mpirun
  std::optional<EvalResult> last_eval;  // none when eval.interval is 0
  double baseline = 0;                  // GPT: unigram bits/char of the validation text; BERT: most-frequent accuracy
  double own_token_baseline = 0;        // BERT: accuracy from each position's own input token (MaskedBaselines)
  bool causal = true;                   // GPT (bits/char, sample) or BERT (masked-token accuracy)
  std::string program;                  // how the user runs tapeformer, for the commands suggested
  std::string checkpoint_dir, last_checkpoint, recipe_path, prompt;
  bool interrupted = false;
};
void print_run_report(std::ostream& out, const RunReport& report);

}  // namespace tf::train

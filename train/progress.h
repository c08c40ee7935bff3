// The progress display of training: one line redrawn in place on a terminal, plain lines otherwise.
//   step 120/2000  loss 2.3141  lr 1.20e-03  41.2k tok/s  elapsed 0:31  eta 8:05
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>

namespace tf::train {

struct EvalResult;

class Progress {
 public:
  Progress(std::ostream& out, int64_t total_steps, bool terminal);
  void update(int64_t step, double loss, double lr, int64_t tokens_this_step);
  void report_eval(int64_t step, const EvalResult& e);
  void finish();  // ends the redrawn line
  double tokens_per_second() const;
  double elapsed_seconds() const;

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

}  // namespace tf::train

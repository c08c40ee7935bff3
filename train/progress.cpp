// Progress line and evaluation reports.
#include "train/progress.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include "train/evaluate.h"

namespace tf::train {

namespace {
std::string clock(double seconds) {
  const long s = static_cast<long>(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

// A word the shell reads back as `s`: single quotes unless it is plainly safe.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:+,@") == std::string::npos;
  if (plain) return s;
  std::string quoted = "'";
  for (const char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}
}  // namespace

Progress::Progress(std::ostream& out, int64_t total_steps, bool terminal)
    : out_(out), total_(total_steps), terminal_(terminal), start_(std::chrono::steady_clock::now()),
      last_print_(start_), steady_start_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double Progress::tokens_per_second() const {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - steady_start_).count();
  return steady_tokens_ > 0 && t > 0 ? steady_tokens_ / t : 0.0;
}

void Progress::update(int64_t step, double loss, double lr, int64_t tokens_this_step) {
  const auto now = std::chrono::steady_clock::now();
  if (first_step_ < 0) {
    first_step_ = step;
    steady_start_ = now;  // throughput counts from the end of the first step
  } else {
    steady_tokens_ += tokens_this_step;
  }
  tokens_ += tokens_this_step;
  // Redraw at most 10 times a second on a terminal; plain lines every 5% of the run otherwise.
  const bool last = step == total_;
  if (terminal_) {
    if (!last && now - last_print_ < std::chrono::milliseconds(100)) return;
  } else if (!last && step % std::max<int64_t>(1, total_ / 20) != 0) {
    return;
  }
  last_print_ = now;
  const double rate = tokens_per_second();
  const double per_step = (step - first_step_) > 0 ? std::chrono::duration<double>(now - steady_start_).count() / (step - first_step_) : 0;
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  lr %.2e  %.1fk tok/s  elapsed %s  eta %s",
                static_cast<long long>(step), static_cast<long long>(total_), loss, lr, rate / 1000,
                clock(elapsed_seconds()).c_str(), clock(per_step * (total_ - step)).c_str());
  if (terminal_) {
    out_ << "\r\033[K" << line << std::flush;
    line_open_ = true;
  } else {
    out_ << line << "\n" << std::flush;
  }
}

void Progress::report_eval(int64_t step, const EvalResult& e) {
  finish();
  char line[256];
  int n = std::snprintf(line, sizeof line, "eval at step %lld: val loss %.4f  perplexity %.2f",
                        static_cast<long long>(step), e.loss, e.perplexity);
  if (std::isfinite(e.bits_per_char)) n += std::snprintf(line + n, sizeof line - n, "  bits/char %.3f", e.bits_per_char);
  if (std::isfinite(e.mlm_accuracy)) std::snprintf(line + n, sizeof line - n, "  masked-token accuracy %.3f", e.mlm_accuracy);
  out_ << line << "\n" << std::flush;
}

void Progress::note(const std::string& line) {
  finish();
  out_ << line << "\n" << std::flush;
}

void Progress::finish() {
  if (line_open_) out_ << "\n" << std::flush;
  line_open_ = false;
}


void print_run_report(std::ostream& out, const RunReport& r) {
  char line[256];
  const std::string ranks = r.ranks > 1 ? std::to_string(r.ranks) + " ranks x " : "";
  std::snprintf(line, sizeof line, "%s: %lld steps in %s, %.1fk tokens/s on %s%d thread%s%s",
                r.interrupted ? "stopped" : "done", static_cast<long long>(r.steps_done), clock(r.wall_seconds).c_str(),
                r.tokens_per_second / 1000, ranks.c_str(), r.threads, r.threads == 1 ? "" : "s",
                r.ranks > 1 ? " each" : "");
  out << "\n" << line << "\n";
  if (r.last_eval) {
    if (r.causal && std::isfinite(r.last_eval->bits_per_char))
      std::snprintf(line, sizeof line, "validation: %.3f bits/char; a context-free (unigram) model needs %.3f",
                    r.last_eval->bits_per_char, r.baseline);
    else if (!r.causal)
      std::snprintf(line, sizeof line,
                    "validation: masked-token accuracy %.3f; always guessing the most frequent token scores %.3f, "
                    "guessing from the position's own input token alone %.3f",
                    r.last_eval->mlm_accuracy, r.baseline, r.own_token_baseline);
    else
      std::snprintf(line, sizeof line, "validation: loss %.4f nats/token", r.last_eval->loss);
    out << line << "\n";
  }
  if (r.last_checkpoint.empty()) return;
  const std::string file = std::filesystem::path(r.last_checkpoint).filename().string();
  const std::string ckpt = shell_word(r.last_checkpoint), program = shell_word(r.program);
  out << "checkpoints: " << r.checkpoint_dir << "/ (newest " << file << ")\n" << "next:\n";
  if (r.interrupted) out << "  " << program << " train " << shell_word(r.recipe_path) << " --resume\n";
  if (r.causal) out << "  " << program << " sample " << ckpt << " --prompt " << shell_word(r.prompt) << " --tokens 200\n";
  out << "  " << program << " eval " << ckpt << "\n" << "  " << program << " info " << ckpt << "\n" << std::flush;
}

}  // namespace tf::train

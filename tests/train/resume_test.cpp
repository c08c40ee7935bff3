// Exact resume: 2N steps in one run equal N steps, a stop, and N more after `resume` — the loss at
// every step and every parameter bit, for a GPT with dropout (the dropout RNG state must carry
// over) and a BERT with grad_accum 2 (masked batches), on one thread and on the default count.
// Also: a checkpoint loaded into a recipe of another width names every differing parameter.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <set>
#include <streambuf>

#include "framework/io/hdf5_io.h"
#include "train/checkpoint.h"
#include "train/run_compare.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using TempDir = tf::testing::RunTempDir;

constexpr int64_t kHalf = 6;  // N: the split run stops after N steps of 2N

// An output stream that raises SIGINT — what Ctrl-C does — when the progress line of step `stop`
// is printed, so the trainer's own interrupt path stops the run after exactly that step.
class InterruptAtStep : public std::streambuf {
 public:
  explicit InterruptAtStep(int64_t stop) : prefix_("step " + std::to_string(stop) + "/") {}
  bool raised() const { return raised_; }

 protected:
  int overflow(int c) override {
    if (c == '\n') {
      if (!raised_ && line_.rfind(prefix_, 0) == 0) {
        raised_ = true;
        std::raise(SIGINT);  // the trainer's handler only sets a flag, checked after the step
      }
      line_.clear();
    } else if (c != EOF) {
      line_ += static_cast<char>(c);
    }
    return c;
  }

 private:
  std::string prefix_, line_;
  bool raised_ = false;
};

// How the split run stops after N steps.
enum class Stop {
  interrupt,     // SIGINT during step N of a 2N-step recipe: the recipe never changes
  shorter_run,   // a recipe of N steps, resumed with 2N (a constant schedule, so lr agrees)
};

struct ResumeCase {
  std::string name;
  std::string recipe;
  std::vector<std::string> overrides;
  Stop stop;
};

std::ostream& operator<<(std::ostream& os, const ResumeCase& c) { return os << c.name; }

class ExactResume : public ::testing::TestWithParam<std::tuple<ResumeCase, int>> {};

TEST_P(ExactResume, SplitRunEqualsStraightRun) {
  const auto& [c, threads] = GetParam();
  TempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(6000));
  std::vector<std::string> overrides = c.overrides;
  overrides.push_back("train.steps=" + std::to_string(2 * kHalf));
  overrides.push_back("train.threads=" + std::to_string(threads));
  const fs::path dir_a = tmp / "straight", dir_b = tmp / "split";
  const Recipe straight = tf::testing::tiny_recipe(c.recipe, text, dir_a, tmp / "cache", overrides);
  const Recipe split = tf::testing::tiny_recipe(c.recipe, text, dir_b, tmp / "cache", overrides);

  std::ostringstream sink;
  TrainOptions quiet;
  quiet.out = &sink;
  const TrainSummary a = train(straight, quiet);
  EXPECT_EQ(a.final_step, 2 * kHalf);

  if (c.stop == Stop::interrupt) {
    InterruptAtStep interrupter(kHalf);
    std::ostream out(&interrupter);
    TrainOptions first;
    first.out = &out;
    const TrainSummary b1 = train(split, first);
    ASSERT_TRUE(interrupter.raised());
    EXPECT_TRUE(b1.interrupted);
    EXPECT_EQ(b1.final_step, kHalf);
  } else {
    Recipe shorter = split;
    shorter.train.steps = kHalf;
    const TrainSummary b1 = train(shorter, quiet);
    EXPECT_EQ(b1.final_step, kHalf);
  }
  ASSERT_TRUE(fs::exists(checkpoint_path(dir_b, kHalf)));
  TrainOptions resume = quiet;
  resume.resume = "";
  resume.accept_changes = c.stop != Stop::interrupt;  // the shorter run's recipe had N steps, now 2N
  const TrainSummary b2 = train(split, resume);
  EXPECT_EQ(b2.steps_done, kHalf);
  EXPECT_EQ(b2.final_step, 2 * kHalf);
  EXPECT_EQ(b2.last_loss, a.last_loss);

  tf::testing::expect_same_steps(dir_a / "metrics.jsonl", dir_b / "metrics.jsonl", 2 * kHalf);
  const auto ma = tf::testing::read_metrics(dir_a / "metrics.jsonl");
  // The run learned something, so equal losses are not equal constants.
  EXPECT_LT(tf::testing::number(ma.back(), "train_loss"), tf::testing::number(ma.front(), "train_loss"));

  const fs::path final_a = checkpoint_path(dir_a, 2 * kHalf), final_b = checkpoint_path(dir_b, 2 * kHalf);
  tf::testing::expect_same_parameters(final_a, final_b);
  // Dropout drew from the RNG, so its saved state is what made the second half agree.
  const std::vector<uint64_t> rng = H5Reader(final_a.string()).read_u64("rng", "dropout");
  ASSERT_EQ(rng.size(), 2u);
  EXPECT_GT(rng[1], 0u) << "dropout never drew a seed: the RNG state was not exercised";
}

INSTANTIATE_TEST_SUITE_P(
    Train, ExactResume,
    ::testing::Combine(
        ::testing::Values(ResumeCase{"GptDropoutInterrupted",
                                     "tiny_gpt",
                                     {"model.dropout=0.1", "model.attn_dropout=0.1"},
                                     Stop::interrupt},
                          // Every mixer in one stack: differential attention's lambdas and norm, a
                          // Mamba layer's conv, scan and Delta, linear attention, RoPE on the softmax
                          // and differential layers (issue 15: any mix resumes bit-exactly).
                          ResumeCase{"GptEveryMixerInterrupted",
                                     "tiny_gpt",
                                     {"model.n_layers=4", "model.mixer=[differential, mamba, linear, attention]",
                                      "model.position=rope", "model.dropout=0.1", "model.mamba_state=4"},
                                     Stop::interrupt},
                          // Muon's momentum buffers beside AdamW's moments (the untied head and the
                          // embeddings), and its rate following the schedule's.
                          ResumeCase{"GptMuonInterrupted",
                                     "tiny_gpt",
                                     {"optim.name=muon", "model.tie_embeddings=false"},
                                     Stop::interrupt},
                          ResumeCase{"BertGradAccum2Extended",
                                     "tiny_bert",
                                     {"model.dropout=0.1", "train.grad_accum=2", "schedule.kind=constant"},
                                     Stop::shorter_run}),
        ::testing::Values(1, 0)),
    [](const auto& info) {
      return std::get<0>(info.param).name + (std::get<1>(info.param) == 1 ? "OneThread" : "DefaultThreads");
    });

TEST(Resume, AnotherWidthIsRefusedKeyByKeyAndParameterByParameter) {
  TempDir tmp;
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(3000));
  std::ostringstream sink;
  TrainOptions quiet;
  quiet.out = &sink;
  const Recipe narrow = tf::testing::tiny_recipe("tiny_gpt", text, tmp / "run", tmp / "cache", {"train.steps=2", "schedule.warmup_steps=1"});
  train(narrow, quiet);
  const fs::path file = checkpoint_path(tmp / "run", 2);

  const Recipe wide = tf::testing::tiny_recipe("tiny_gpt", text, tmp / "run", tmp / "cache",
                                               {"train.steps=4", "schedule.warmup_steps=1", "model.d_model=48"});
  // The parameters whose shapes differ, found independently of the error message.
  const LoadedRun stored = load_checkpoint(file);
  const train::Run other = build_run(wide, data::Tokenizer::from_string(checkpoint_tokenizer(file)));
  std::vector<std::string> differing;
  for (size_t i = 0; i < other.params.size(); ++i) {
    ASSERT_EQ(other.params[i].name, stored.run.params[i].name);
    if (other.params[i].tensor.shape() != stored.run.params[i].tensor.shape()) differing.push_back(other.params[i].name);
  }
  ASSERT_GT(differing.size(), 3u);

  // --resume refuses the changed width from the recipes alone, key by key, before building anything.
  TrainOptions resume = quiet;
  resume.resume = "";
  std::string refused;
  try {
    train(wide, resume);
  } catch (const InputError& e) {
    refused = e.what();
  }
  EXPECT_NE(refused.find("--resume: the recipe differs from the checkpoint's (" + file.string() +
                         ") where a run cannot continue:\n  model.d_model: 32 in the checkpoint, 48 now"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("train.steps"), std::string::npos) << "a continuable key among the refused: " << refused;

  // A checkpoint whose tensors do not fit the model (as a forged recipe would give) is refused by its
  // parameters, every difference listed.
  train::Run into = build_run(wide, data::Tokenizer::from_string(checkpoint_tokenizer(file)));
  std::string message;
  try {
    load_checkpoint_into(into, file);
  } catch (const InputError& e) {
    message = e.what();
  }
  ASSERT_NE(message, "") << "loading a d_model 32 checkpoint into d_model 48 did not fail";
  EXPECT_NE(message.find("does not match the model"), std::string::npos) << message;
  EXPECT_NE(message.find(file.filename().string()), std::string::npos) << message;
  // Listed: the first 20 differing parameters, then "... and K more".
  const size_t listed = std::min<size_t>(differing.size(), 20);
  for (size_t i = 0; i < listed; ++i)
    EXPECT_NE(message.find("parameter '" + differing[i] + "' is "), std::string::npos) << differing[i] << "\n" << message;
  if (differing.size() > 20) {
    EXPECT_NE(message.find("and " + std::to_string(differing.size() - 20) + " more"), std::string::npos) << message;
  }
  EXPECT_NE(message.find("48"), std::string::npos) << message;
  // The failed resume wrote nothing: the newest checkpoint is still the one of step 2.
  EXPECT_EQ(latest_checkpoint(tmp / "run"), file);
}

}  // namespace
}  // namespace tf::train

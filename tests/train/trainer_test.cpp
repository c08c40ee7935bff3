// The training loop's behaviours: a non-finite loss stops with the step named and no checkpoint
// of it; SIGINT to `tapeformer train` checkpoints, says "interrupted", exits 130 and resumes; the run
// folder's recipe.yaml and metrics.jsonl; --dry-run trains and writes nothing; checkpoint.keep;
// a missing Brown corpus says how to fetch it.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <regex>

#include "data/root.h"
#include "framework/random.h"
#include "train/checkpoint.h"
#include "train/run.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::Child;
using TempDir = tf::testing::RunTempDir;
using tf::testing::number;
using tf::testing::read_file;
using tf::testing::read_metrics;

using tf::testing::CwdGuard;

class Trainer : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = tmp_ / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(6000));
    quiet_.out = &sink_;
  }
  Recipe recipe(std::vector<std::string> more, const std::string& name = "tiny_gpt") const {
    return tf::testing::tiny_recipe(name, text_, tmp_ / "run", tmp_ / "cache", std::move(more));
  }
  std::vector<std::string> args(std::vector<std::string> more) const {
    return tf::testing::train_args("tiny_gpt", text_, tmp_ / "run", tmp_ / "cache", std::move(more));
  }

  TempDir tmp_;
  fs::path text_;
  std::ostringstream sink_;
  TrainOptions quiet_;
};

void custom_sigint(int) {}

TEST_F(Trainer, NonFiniteLossStopsNamingTheStepWithoutItsCheckpoint) {
  // Plain SGD at lr 10 with momentum, no clipping and no warmup, from weights of std 1: each step
  // multiplies the weights' scale until the logits overflow float32 (measured: within ~10 steps).
  const Recipe r = recipe({"optim.name=sgd", "optim.lr=10", "optim.momentum=0.9", "optim.weight_decay=0",
                           "schedule.kind=constant", "schedule.warmup_steps=0", "train.grad_clip=0",
                           "model.init_std=1.0", "train.steps=200", "checkpoint.interval=1",
                           "checkpoint.keep=1000", "eval.interval=0"});
  const auto previous = std::signal(SIGINT, custom_sigint);
  std::string message;
  try {
    train(r, quiet_);
  } catch (const InputError& e) {
    message = e.what();
  }
  // The caller's Ctrl-C handler is back although train() threw.
  EXPECT_EQ(std::signal(SIGINT, previous), &custom_sigint);
  ASSERT_NE(message, "") << "200 steps of SGD at lr 10 stayed finite; the test needs a harsher setting";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(message, m, std::regex(R"(^step (\d+): )"))) << message;
  const int64_t bad_step = std::stoll(m[1]);
  EXPECT_TRUE(message.find("not finite") != std::string::npos || message.find("training loss is") != std::string::npos)
      << message;
  std::cout << "[ info ] non-finite at step " << bad_step << ": " << message << "\n";

  const fs::path dir = tmp_ / "run";
  EXPECT_FALSE(fs::exists(checkpoint_path(dir, bad_step)));
  const auto latest = latest_checkpoint(dir);
  if (bad_step == 1) {
    EXPECT_FALSE(latest.has_value());
  } else {
    // Every step before it was checkpointed, and the last good one holds finite weights.
    ASSERT_EQ(latest, checkpoint_path(dir, bad_step - 1));
    const LoadedRun loaded = load_checkpoint(*latest);
    for (const auto& p : loaded.run.params) {
      const float* d = p.tensor.data<float>();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) ASSERT_TRUE(std::isfinite(d[i])) << p.name;
    }
    // metrics.jsonl ends at the last good step: nothing is logged for the failed one.
    const auto metrics = read_metrics(dir / "metrics.jsonl");
    ASSERT_FALSE(metrics.empty());
    EXPECT_EQ(metrics.back().at("step"), std::to_string(bad_step - 1));
  }
}

// A run whose loss climbs to 10 times its best without turning non-finite gets one warning naming
// the likely causes. Plain SGD with momentum at learning rate 5, no clipping, no warmup: the loss
// climbs within a few steps (and may later overflow, which stops the run; the warning comes first).
TEST_F(Trainer, ADivergingRunIsWarnedAboutOnce) {
  const Recipe r = recipe({"optim.name=sgd", "optim.lr=5", "optim.momentum=0.9", "optim.weight_decay=0",
                           "schedule.kind=constant", "schedule.warmup_steps=0", "train.grad_clip=0",
                           "train.steps=30", "eval.interval=0"});
  std::string message;
  try {
    train(r, quiet_);
  } catch (const InputError& e) {
    message = e.what();  // a loss that overflows stops the run; the warning must have come before
  }
  const std::string out = sink_.str();
  const size_t at = out.find("is over 10 times its best");
  ASSERT_NE(at, std::string::npos) << out << message;
  EXPECT_EQ(out.find("is over 10 times its best", at + 1), std::string::npos) << "warned twice";
  EXPECT_NE(out.find("the run is diverging. Likely causes: the learning rate (optim.lr 5; try a third of it), no "
                     "gradient clipping (train.grad_clip: 0; 1.0 is usual), no warmup"),
            std::string::npos)
      << out;
}

TEST_F(Trainer, NanWeightStopsAtTheLossCheck) {
  // Train 2 steps; resume with a NaN put into the final layer norm's scale before training goes on (a
  // checkpoint holding it would be refused at load); step 3's loss is NaN.
  const fs::path dir = tmp_ / "run";
  const Recipe r = recipe({"train.steps=4", "schedule.warmup_steps=1", "checkpoint.interval=1", "eval.interval=0"});
  Recipe first = r;
  first.train.steps = 2;
  train(first, quiet_);

  TrainOptions resume = quiet_;
  resume.resume = "";
  resume.accept_changes = true;  // train.steps 2 -> 4
  bool poisoned = false;
  resume.before_training = [&](tf::train::Run& run) {
    for (const auto& p : run.params)
      if (p.name == "ln_f.weight") p.tensor.data<float>()[0] = std::nanf(""), poisoned = true;
  };
  std::string message;
  try {
    train(r, resume);
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_TRUE(poisoned);
  EXPECT_EQ(message.rfind("step 3: the training loss is ", 0), 0u) << message;
  EXPECT_NE(message.find("nan"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(checkpoint_path(dir, 3)));
  EXPECT_EQ(latest_checkpoint(dir), checkpoint_path(dir, 2));
}

TEST_F(Trainer, SigintCheckpointsSaysInterruptedExitsZeroAndResumes) {
  const fs::path dir = tmp_ / "run";
  const int64_t steps = 300;
  const std::vector<std::string> a =
      args({"train.steps=" + std::to_string(steps), "train.threads=1", "eval.interval=100", "checkpoint.interval=100"});
  int64_t seen = 0;
  {
    Child child(a, tmp_ / "out1.txt", tmp_ / "err1.txt");
    ASSERT_TRUE(child.started());
    // Wait until it is training (a metrics record exists, so the handler is installed) ...
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline && !child.exited()) {
      if (fs::exists(dir / "metrics.jsonl") && read_metrics(dir / "metrics.jsonl").size() >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_FALSE(child.exited()) << "the run ended before SIGINT: " << read_file(tmp_ / "err1.txt");
    seen = static_cast<int64_t>(read_metrics(dir / "metrics.jsonl").size());
    ::kill(child.pid(), SIGINT);  // ... then Ctrl-C
    const int status = child.wait();
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(tmp_ / "err1.txt");  // 128 + SIGINT, as shells report
  }
  const std::string out = read_file(tmp_ / "out1.txt");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(interrupted: checkpoint written to (\S+) at step (\d+))"))) << out;
  const int64_t stopped = std::stoll(m[2]);
  EXPECT_GE(stopped, seen);
  EXPECT_LT(stopped, steps) << "the interrupt landed after the last step: the test proves nothing";
  EXPECT_EQ(fs::path(m[1].str()), checkpoint_path(dir, stopped));
  ASSERT_EQ(latest_checkpoint(dir), checkpoint_path(dir, stopped));
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir, stopped)).run.step, stopped);
  EXPECT_EQ(read_metrics(dir / "metrics.jsonl").back().at("step"), std::to_string(stopped));

  std::vector<std::string> resume = a;
  resume.push_back("--resume");
  ASSERT_EQ(tf::testing::run_tapeformer(resume, tmp_ / "out2.txt", tmp_ / "err2.txt"), 0)
      << read_file(tmp_ / "err2.txt");
  const std::string out2 = read_file(tmp_ / "out2.txt");
  EXPECT_NE(out2.find("resuming from " + checkpoint_path(dir, stopped).string() + " at step " + std::to_string(stopped)),
            std::string::npos)
      << out2;
  EXPECT_EQ(latest_checkpoint(dir), checkpoint_path(dir, steps));
  // One record per step across both processes: the resumed run continued where the first stopped.
  const auto metrics = read_metrics(dir / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) EXPECT_EQ(metrics[i].at("step"), std::to_string(i + 1));
}

TEST_F(Trainer, RunFolderHoldsTheRecipeAndOneMetricsRecordPerLoggedStep) {
  const Recipe r = recipe({"train.steps=10", "eval.interval=5", "schedule.warmup_steps=4"});
  const TrainSummary s = train(r, quiet_);
  const fs::path dir = tmp_ / "run";

  // recipe.yaml is the resolved recipe: it parses back to the same one.
  const Recipe back = parse_recipe(read_file(dir / "recipe.yaml"), "recipe.yaml");
  EXPECT_EQ(back.to_yaml(), r.to_yaml());
  EXPECT_EQ(back.train.steps, 10);
  EXPECT_EQ(back.data.train_path, std::vector<std::string>{text_.string()});

  const auto metrics = read_metrics(dir / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 10u);
  const std::vector<std::string> keys = {"step",           "train_loss",        "val_loss",         "val_perplexity",
                                         "val_bits_per_char", "val_mlm_accuracy", "lr",            "grad_norm",
                                         "tokens_per_s",   "elapsed_s",         "run"};
  double previous_elapsed = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    std::vector<std::string> found;
    for (const auto& [k, v] : metrics[i]) found.push_back(k);
    std::vector<std::string> sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(found, sorted);
    EXPECT_EQ(metrics[i].at("step"), std::to_string(i + 1));
    EXPECT_EQ(metrics[i].at("run"), metrics[0].at("run"));  // one run id, 16 hex digits in quotes
    EXPECT_TRUE(std::regex_match(metrics[i].at("run"), std::regex("\"[0-9a-f]{16}\""))) << metrics[i].at("run");
    EXPECT_TRUE(std::isfinite(number(metrics[i], "train_loss")));
    EXPECT_GT(number(metrics[i], "grad_norm"), 0);
    EXPECT_GT(number(metrics[i], "lr"), 0);
    EXPECT_LE(number(metrics[i], "lr"), r.optim.lr);
    EXPECT_GE(number(metrics[i], "tokens_per_s"), 0);
    EXPECT_GE(number(metrics[i], "elapsed_s"), previous_elapsed);
    previous_elapsed = number(metrics[i], "elapsed_s");
    // Validation at steps 5 and 10 only.
    const bool eval_step = (i + 1) % 5 == 0;
    EXPECT_EQ(metrics[i].at("val_loss") != "null", eval_step);
    EXPECT_EQ(metrics[i].at("val_perplexity") != "null", eval_step);
    EXPECT_EQ(metrics[i].at("val_bits_per_char") != "null", eval_step);  // a GPT on characters
    EXPECT_EQ(metrics[i].at("val_mlm_accuracy"), "null");
    if (eval_step) {
      EXPECT_NEAR(number(metrics[i], "val_perplexity"), std::exp(number(metrics[i], "val_loss")), 1e-9);
      // Characters: one token each, so bits per character is the loss in bits.
      EXPECT_NEAR(number(metrics[i], "val_bits_per_char"), number(metrics[i], "val_loss") / std::log(2.0), 1e-9);
    }
  }
  // Warmup: the rate rises linearly over the first 4 steps.
  EXPECT_LT(number(metrics[0], "lr"), number(metrics[1], "lr"));
  EXPECT_LT(number(metrics[2], "lr"), number(metrics[3], "lr"));
  EXPECT_GT(number(metrics[9], "tokens_per_s"), 0);
  // The log agrees with the summary to the last bit.
  EXPECT_EQ(number(metrics.back(), "train_loss"), s.last_loss);
  EXPECT_EQ(number(metrics.back(), "val_loss"), s.last_val_loss);
}

TEST_F(Trainer, DryRunTrainsNothingAndWritesNothing) {
  TrainOptions dry = quiet_;
  dry.dry_run = true;
  const TrainSummary s = train(recipe({"train.steps=5"}), dry);
  EXPECT_EQ(s.steps_done, 0);
  EXPECT_EQ(s.last_checkpoint, "");
  EXPECT_NE(sink_.str().find("parameters"), std::string::npos) << sink_.str();
  EXPECT_FALSE(fs::exists(tmp_ / "run"));

  // The command line too: exit 0, the plan printed, no run folder.
  std::vector<std::string> a = args({"train.steps=5"});
  a.push_back("--dry-run");
  ASSERT_EQ(tf::testing::run_tapeformer(a, tmp_ / "out.txt", tmp_ / "err.txt"), 0) << read_file(tmp_ / "err.txt");
  EXPECT_NE(read_file(tmp_ / "out.txt").find("FLOPs per token"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp_ / "run"));
}

// The plan comes from the recipe alone: a model of ~100G parameters (400 GB in float32) is planned,
// not built (building it would throw bad_alloc or exhaust the machine). The dry run prints the plan,
// then refuses it as train would (exit 2, naming the memory).
TEST_F(Trainer, DryRunOfAModelFarTooLargeForTheMachinePrintsItsPlan) {
  std::vector<std::string> a = args({"train.steps=5", "model.d_model=65536", "model.n_heads=1"});
  a.push_back("--dry-run");
  ASSERT_EQ(tf::testing::run_tapeformer(a, tmp_ / "out.txt", tmp_ / "err.txt"), 2) << read_file(tmp_ / "err.txt");
  EXPECT_NE(read_file(tmp_ / "err.txt").find("--dry-run: train would refuse this run: the run needs about "),
            std::string::npos)
      << read_file(tmp_ / "err.txt");
  const std::string out = read_file(tmp_ / "out.txt");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(parameters +(\d+))"))) << out;
  EXPECT_GT(std::stod(m[1]), 1e11) << out;
  EXPECT_FALSE(fs::exists(tmp_ / "run"));
}

// The same model for real is refused before anything is allocated (it used to end in bad_alloc, exit
// 1), naming its size, the machine's memory and the keys that drive the size; nothing is written.
TEST_F(Trainer, ARunThatCannotFitInMemoryIsRefusedBeforeAllocating) {
  const auto a = args({"train.steps=5", "model.d_model=65536", "model.n_heads=1"});
  EXPECT_EQ(tf::testing::run_tapeformer(a, tmp_ / "out.txt", tmp_ / "err.txt"), 2);
  const std::string err = read_file(tmp_ / "err.txt");
  EXPECT_TRUE(std::regex_search(err, std::regex(R"(error: the run needs about \d+\.\d GiB \(\d+ parameters, from model\.d_model)")))
      << err;
  EXPECT_NE(err.find("GiB of memory: make the model or the batch smaller"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tmp_ / "run" / "metrics.jsonl"));
}

TEST_F(Trainer, KeepLeavesOnlyTheNewestCheckpoints) {
  train(recipe({"train.steps=6", "checkpoint.interval=1", "checkpoint.keep=2", "eval.interval=0"}), quiet_);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp_ / "run")) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  const std::vector<std::string> expected = {checkpoint_path("", 5).string(), checkpoint_path("", 6).string(),
                                             "metrics.jsonl", "recipe.yaml"};
  EXPECT_EQ(files, expected);
}

TEST_F(Trainer, TrainingWindowsDrawFromAStreamOfTheirOwn) {
  // Note [independent streams] (train/run.cpp): the initialisation reads Rng(train.seed) from
  // counter 0, so a batcher on Rng(train.seed) would place window k by the draw that set weight k / 2
  // of token_embedding (issue 20). The checkpoint stores the batcher's generator: its seed must be
  // the derived one, distinct from the initialisation's and dropout's, and it must have drawn B
  // starts per step from counter 0.
  const Recipe r = recipe({"train.seed=7", "train.steps=2", "schedule.warmup_steps=0", "checkpoint.interval=1",
                           "eval.interval=0"});
  train(r, quiet_);
  const LoadedRun loaded = load_checkpoint(checkpoint_path(tmp_ / "run", 2));
  EXPECT_EQ(loaded.batches.seed, training_batch_seed(7));
  EXPECT_NE(loaded.batches.seed, 7u);
  EXPECT_NE(loaded.batches.seed, Rng(7).fork(1).seed());  // dropout's
  EXPECT_EQ(loaded.batches.counter, static_cast<uint64_t>(2 * r.train.grad_accum * r.train.batch_size));
  // The first starts differ from the ones the initialisation's draws would give.
  Rng windows(loaded.batches.seed), init(7);
  int same = 0;
  for (int k = 0; k < 16; ++k) same += windows.uniform_int(1000) == init.uniform_int(1000);
  EXPECT_LT(same, 3);
}

TEST_F(Trainer, MissingBrownCorpusNamesTheSetupCommandThePathAndTheKey) {
  const fs::path empty = tmp_ / "elsewhere";  // a data root without the corpus
  fs::create_directories(empty);
  // The shipped recipe as it is (data.corpus: brown).
  const std::string yaml = read_file(tf::testing::source_path("recipes/tiny_gpt.yaml"));
  const auto message_of = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> all = {"checkpoint.dir=" + (tmp_ / "run").string()};
    all.insert(all.end(), sets.begin(), sets.end());
    const Recipe r = parse_recipe(yaml, "tiny_gpt.yaml", all);
    EXPECT_EQ(r.data.corpus, "brown");
    try {
      train(r, quiet_);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string message = message_of({"data.root=" + empty.string()});
  EXPECT_NE(message.find("scripts/setup.sh --corpus"), std::string::npos) << message;
  EXPECT_NE(message.find("'" + (empty / "brown/raw").string() + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("or set data.brown_dir (or data.root, or TAPEFORMER_DATA)"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(tmp_ / "run"));
  {
    // A relative root starts from the current folder; the message names the absolute path tried.
    const CwdGuard cwd(empty);
    message = message_of({"data.root=relative"});
    EXPECT_NE(message.find("(" + (fs::canonical(empty) / "relative/brown/raw").string() + ")"), std::string::npos)
        << message;
  }

  // The installed corpus is found from any folder: the default data root does not depend on it.
  if (fs::exists(tf::data::data_root("") / "brown/raw/cr09")) {
    const CwdGuard cwd(empty);
    Recipe found = parse_recipe(yaml, "tiny_gpt.yaml",
                                {"checkpoint.dir=" + (tmp_ / "run2").string(), "train.steps=1", "schedule.warmup_steps=0",
                                 "eval.interval=0", "sample.tokens=0", "data.cache_dir=" + (tmp_ / "cache").string()});
    EXPECT_NO_THROW(train(found, quiet_));
  }

  // The command: exit code 2 (bad input) and the same advice on stderr; TAPEFORMER_DATA moves the root.
  const std::vector<std::string> a = {"train", tf::testing::source_path("recipes/tiny_gpt.yaml"), "--set",
                                      "checkpoint.dir=" + (tmp_ / "run").string()};
  {
    const tf::testing::EnvGuard root("TAPEFORMER_DATA", empty.string());
    EXPECT_EQ(tf::testing::run_tapeformer(a, tmp_ / "out.txt", tmp_ / "err.txt", empty), 2);
  }
  const std::string err = read_file(tmp_ / "err.txt");
  EXPECT_NE(err.find("scripts/setup.sh --corpus"), std::string::npos) << err;
  EXPECT_NE(err.find("'" + (empty / "brown/raw").string() + "'"), std::string::npos) << err;
}

}  // namespace
}  // namespace tf::train

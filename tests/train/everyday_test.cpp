// Everyday use (issue "a run folder is the user's data", part 3): a short run on a shipped recipe says
// how to shorten its warmup, naming the --set; sample, eval and info take a run folder, and a wrong
// checkpoint name lists those that exist; --resume with nothing left to train exits 2 saying how to
// train further; the banner says when OMP_NUM_THREADS overrides train.threads; --version.
#include <gtest/gtest.h>

#include <regex>

#include "train/checkpoint.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;

class Everyday : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = tmp_.path() / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(6000));
  }
  using Outcome = tf::testing::CommandOutcome;
  Outcome run(const std::vector<std::string>& args) const { return tf::testing::run_command(args, tmp_.path()); }
  std::vector<std::string> train(std::vector<std::string> sets, const std::vector<std::string>& flags = {}) const {
    sets.insert(sets.begin(), "eval.interval=0");  // a test may set it again
    std::vector<std::string> args = tf::testing::train_args("tiny_gpt", text_, dir_, tmp_.path() / "cache", sets);
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  tf::testing::RunTempDir tmp_;
  fs::path text_, dir_ = tmp_.path() / "run";
};

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

TEST_F(Everyday, AShortRunNamesItsSetAndTheWarmupThatFits) {
  const Outcome o = run(train({"train.steps=3"}));  // tiny_gpt.yaml warms up for 5 steps
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "schedule.warmup_steps (5) exceeds train.steps (3, from --set train.steps=3): the warmup must "
                    "end within the run; shorten it too, e.g. --set schedule.warmup_steps=0");
}

TEST_F(Everyday, CommandsTakeARunFolderAndListCheckpointsForAWrongName) {
  ASSERT_EQ(run(train({"train.steps=12", "checkpoint.interval=6", "schedule.warmup_steps=2"})).code, 0);
  const std::string newest = checkpoint_path(dir_, 12).string();
  Outcome o = run({"info", dir_.string()});
  EXPECT_EQ(o.code, 0) << o.err;
  expect_has(o.out, "checkpoint   " + newest);
  o = run({"eval", dir_.string()});
  EXPECT_EQ(o.code, 0) << o.err;
  o = run({"sample", dir_.string(), "--tokens", "5"});
  EXPECT_EQ(o.code, 0) << o.err;
  o = run({"eval", (dir_ / "ckpt_12.h5").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, (dir_ / "ckpt_12.h5").string() + ": no such checkpoint; " + dir_.string() +
                        " holds ckpt_00000006.h5, ckpt_00000012.h5 (or pass the folder for the newest)");
  o = run({"info", tmp_.path().string()});  // a folder without checkpoints
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, tmp_.path().string() + ": a folder without checkpoints");
}

TEST_F(Everyday, ResumeWithNothingLeftToTrainExitsTwo) {
  ASSERT_EQ(run(train({"train.steps=6", "schedule.warmup_steps=2"})).code, 0);
  const auto files = list_checkpoints(dir_);
  std::vector<std::string> resume = train({"train.steps=6", "schedule.warmup_steps=2"});
  resume.push_back("--resume");
  const Outcome o = run(resume);
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--resume: " + checkpoint_path(dir_, 6).string() + " is at step 6, and train.steps is 6: nothing "
                    "is left to train. To train further, raise train.steps (--set train.steps=12 --accept-changes) "
                    "or train for more time (--more 5m)");
  EXPECT_EQ(list_checkpoints(dir_), files);
  // The first way it names trains on to step 12.
  std::vector<std::string> further = train({"train.steps=12", "schedule.warmup_steps=2"});
  further.insert(further.end(), {"--resume", "--accept-changes"});
  const Outcome on = run(further);
  EXPECT_EQ(on.code, 0) << on.err;
  expect_has(on.out, "continuing to train.steps 12: the learning rate at step 6 is ");
  EXPECT_TRUE(fs::exists(checkpoint_path(dir_, 12)));
}

TEST_F(Everyday, BannerSaysWhenOmpNumThreadsOverridesTrainThreads) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  const Outcome o = run(train({"train.steps=2", "schedule.warmup_steps=0", "train.threads=2"}));
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(o.code, 0) << o.err;
  expect_has(o.out, "1 thread (OMP_NUM_THREADS=1, overriding train.threads)");
}

// A validation text too short for one evaluation window is found before the first step, naming the
// file and the keys, not at the first evaluation after steps were spent.
TEST_F(Everyday, AValidationTextTooShortIsFoundBeforeTraining) {
  tf::testing::write_file(tmp_.path() / "val.txt", "ab");
  const Outcome o = run(train({"data.val_path=" + (tmp_.path() / "val.txt").string(), "eval.interval=5"}));
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "the validation text (data.val_path '" + (tmp_.path() / "val.txt").string() + "') has ");
  expect_has(o.err, "fewer than one evaluation window of data.seq_len + 1 = 33");
  EXPECT_EQ(o.out.find("step 1/"), std::string::npos) << "a step ran first";
}

// A dry run tokenizes both texts and checks their lengths, so what it accepts, a real run accepts.
TEST_F(Everyday, ADryRunFindsATextTooShortInTokens) {
  tf::testing::write_file(tmp_.path() / "val.txt", "ab");
  Outcome o = run(train({"data.val_path=" + (tmp_.path() / "val.txt").string(), "eval.interval=5"}, {"--dry-run"}));
  EXPECT_EQ(o.code, 2) << o.out;
  expect_has(o.err, "the validation text (data.val_path '" + (tmp_.path() / "val.txt").string() + "') has 2 tokens");

  tf::testing::write_file(tmp_.path() / "short.txt", "Too short.");
  const std::string short_text = (tmp_.path() / "short.txt").string();
  o = run(train({"data.train_path=" + short_text, "data.val_path=" + (tmp_.path() / "val.txt").string(),
                 "eval.interval=0"}, {"--dry-run"}));
  EXPECT_EQ(o.code, 2) << o.out;
  expect_has(o.err, "the training text (data.train_path '" + short_text + "') has 10 tokens, too few for one "
                    "training window of data.seq_len + 1 = 33: give more training text or lower data.seq_len");

  o = run(train({"eval.interval=5"}, {"--dry-run"}));  // the fixture's text is long enough: counts are shown
  EXPECT_EQ(o.code, 0) << o.err;
  expect_has(o.out, " training, ");
}

// Characters outside a char vocabulary are read as <unk>: sample and eval say how many.
TEST_F(Everyday, UnknownCharactersAreCounted) {
  ASSERT_EQ(run(train({"train.steps=2", "schedule.warmup_steps=0"})).code, 0);  // English text: no 'é', no 'Ж'
  Outcome o = run({"sample", dir_.string(), "--prompt", "caf\xc3\xa9 \xd0\x96\xd0\x96", "--tokens", "2"});
  EXPECT_EQ(o.code, 0) << o.err;
  expect_has(o.err, "note: 3 characters of the prompt are outside the checkpoint's vocabulary and were read as <unk>");
  tf::testing::write_file(tmp_.path() / "odd.txt", tf::testing::english_text(2000) + "\xc3\xa9\xc3\xa9");
  o = run({"eval", dir_.string(), "--text", (tmp_.path() / "odd.txt").string()});
  EXPECT_EQ(o.code, 0) << o.err;
  expect_has(o.err, "note: 2 characters of the text are outside the checkpoint's vocabulary");
}

// eval --json: one object with every figure at full precision, the same figures as the table.
TEST_F(Everyday, EvalJsonHasEveryFigureAtFullPrecision) {
  ASSERT_EQ(run(train({"train.steps=2", "schedule.warmup_steps=0"})).code, 0);
  tf::testing::write_file(tmp_.path() / "eval.txt", tf::testing::english_text(3000, 11));
  const std::string text = (tmp_.path() / "eval.txt").string();
  const Outcome table = run({"eval", dir_.string(), "--text", text});
  const Outcome json = run({"eval", dir_.string(), "--text", text, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  std::smatch t, j;
  ASSERT_TRUE(std::regex_search(table.out, t, std::regex(R"(loss +([0-9.]+) nats per token \((\d+) tokens\))"))) << table.out;
  ASSERT_TRUE(std::regex_search(json.out, j, std::regex(R"(^\{"checkpoint": "[^"]+ckpt_00000002\.h5", "step": 2, .*"tokens": (\d+), "loss": ([-0-9.e]+), .*"mlm_accuracy": null, "unigram_bits_per_char": [0-9.e-]+\}\n$)")))
      << json.out;
  EXPECT_EQ(j[1], t[2]);
  EXPECT_NEAR(std::stod(j[2]), std::stod(t[1]), 5e-5);                       // the table rounds to 4 decimals
  EXPECT_GT(j[2].str().size(), 10u) << "full precision, not the table's 4 decimals";
}

// eval --mask-prob sets the share of masked positions; evaluation masks as BERT does whatever the
// run trained with (Note [evaluation masking]), so a run trained with SpanBERT's spans is scored on
// exactly the positions a run without them is.
TEST_F(Everyday, EvalMaskProbSetsTheShareAndTrainingsSpansDoNotChangeEvaluation) {
  const auto bert = [&](const fs::path& dir, std::vector<std::string> sets) {
    sets.insert(sets.begin(), {"eval.interval=0", "train.steps=2", "schedule.warmup_steps=0"});
    return tf::testing::train_args("tiny_bert", text_, dir, tmp_.path() / "cache", sets);
  };
  const fs::path plain = tmp_.path() / "plain", spans = tmp_.path() / "spans";
  ASSERT_EQ(run(bert(plain, {})).code, 0);
  const Outcome trained = run(bert(spans, {"data.mask_span=3", "data.mask_replace_prob=1", "data.random_replace_prob=0"}));
  ASSERT_EQ(trained.code, 0) << trained.err;
  tf::testing::write_file(tmp_.path() / "eval.txt", tf::testing::english_text(20000, 11));
  const std::string text = (tmp_.path() / "eval.txt").string();
  const auto masked = [&](const fs::path& dir, std::vector<std::string> extra) {
    std::vector<std::string> args = {"eval", dir.string(), "--text", text, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Outcome o = run(args);
    EXPECT_EQ(o.code, 0) << o.err;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(o.out, m, std::regex(R"("tokens": (\d+))"))) << o.out;
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  const double at_default = masked(plain, {}), at_half = masked(plain, {"--mask-prob", "0.5"});
  EXPECT_EQ(masked(spans, {}), at_default);
  // About 20,000 characters: 15% and 50% of them, each within a few percent.
  EXPECT_NEAR(at_half / at_default, 0.5 / 0.15, 0.25) << at_half << " and " << at_default;
  const Outcome gpt = run({"eval", spans.string(), "--text", text, "--mask-prob", "1.5"});
  EXPECT_EQ(gpt.code, 2);
  expect_has(gpt.err, "--mask-prob");
  ASSERT_EQ(run(train({"train.steps=1", "schedule.warmup_steps=0"})).code, 0);
  const Outcome on_gpt = run({"eval", dir_.string(), "--text", text, "--mask-prob", "0.3"});
  EXPECT_EQ(on_gpt.code, 2);
  expect_has(on_gpt.err, "is a GPT, which masks nothing");
}

TEST_F(Everyday, VersionIsPrinted) {
  const Outcome o = run({"--version"});
  EXPECT_EQ(o.code, 0);
  expect_has(o.out, "tapeformer " TAPEFORMER_VERSION_FOR_TESTS);
}

}  // namespace
}  // namespace tf::train

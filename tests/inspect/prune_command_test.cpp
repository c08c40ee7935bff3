// `tapeformer prune` on tiny trained GPT and BERT checkpoints: the pruned checkpoint and its recipe are
// written, it is smaller, and it evaluates, samples, passes `gradcheck --model` and resumes training bit
// for bit; `--sweep` lists every pruned size; bad input exits 2 and writes nothing.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "train/run_compare.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

namespace fs = std::filesystem;

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

class PruneCommand : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    text_ = tmp_.path() / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(8000));
    const auto args = tf::testing::train_args(GetParam(), text_, dir_, tmp_.path() / "cache",
                                              {"train.steps=6", "schedule.warmup_steps=2", "eval.interval=0",
                                               "model.n_heads=4", "train.seed=3"});
    ASSERT_EQ(run(args).code, 0) << tf::testing::read_file(tmp_.path() / "err.txt");
  }
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  tf::testing::RunTempDir tmp_;
  fs::path text_, dir_ = tmp_.path() / "run";
};

TEST_P(PruneCommand, PrunedCheckpointEvaluatesSamplesChecksAndResumesBitForBit) {
  const fs::path pruned = tmp_.path() / "pruned.h5", recipe = tmp_.path() / "pruned.yaml";
  auto out = run({"prune", dir_.string(), "--heads", "0.5", "--out", pruned.string()});
  ASSERT_EQ(out.code, 0) << out.err;
  expect_has(out.out, "removed      4 of 8 heads");
  ASSERT_TRUE(fs::exists(pruned));
  ASSERT_TRUE(fs::exists(recipe));
  expect_has(tf::testing::read_file(recipe), "heads_per_layer: [");
  expect_has(tf::testing::read_file(recipe), "head_dim: 8");  // d_model 32 over the original 4 heads
  const std::smatch params = [&] {
    std::smatch m;
    std::regex_search(out.out, m, std::regex(R"(parameters   (\d+) -> (\d+))"));
    return m;
  }();
  ASSERT_EQ(params.size(), 3u) << out.out;
  // Four heads of D = 8 go: 3 D C rows of qkv (with their biases) and D C columns of W_O each, C = 32.
  EXPECT_EQ(std::stoll(params[1]) - std::stoll(params[2]), 4 * (3 * 8 * 32 + 3 * 8 + 8 * 32));

  out = run({"eval", pruned.string(), "--text", text_.string()});
  EXPECT_EQ(out.code, 0) << out.err;
  if (std::string(GetParam()) == "tiny_gpt") {
    out = run({"sample", pruned.string(), "--tokens", "20", "--prompt", "The "});
    EXPECT_EQ(out.code, 0) << out.err;
  }
  out = run({"gradcheck", "--model", recipe.string()});
  EXPECT_EQ(out.code, 0) << out.out << out.err;
  expect_has(out.out, "of head_dim");

  // Resume from the pruned checkpoint to step 10; then again from that run's step-8 checkpoint.
  auto resume = [&](const std::string& folder, const fs::path& from) {
    return run({"train", recipe.string(), "--resume", from.string(), "--accept-changes", "--set",
                "checkpoint.dir=" + (tmp_.path() / folder).string(), "--set", "train.steps=10", "--set",
                "checkpoint.interval=1", "--set", "checkpoint.keep=10"});
  };
  out = resume("straight", pruned);
  ASSERT_EQ(out.code, 0) << out.err;
  expect_has(out.out, "resuming from " + pruned.string() + " at step 6");
  out = resume("split", tmp_.path() / "straight" / "ckpt_00000008.h5");
  ASSERT_EQ(out.code, 0) << out.err;
  tf::testing::expect_same_parameters(tmp_.path() / "straight" / "ckpt_00000010.h5",
                                      tmp_.path() / "split" / "ckpt_00000010.h5");
}

TEST_P(PruneCommand, SweepListsEveryPrunedSizeAndDrawsIt) {
  const fs::path plot = tmp_.path() / "sweep.png";
  const auto out = run({"prune", dir_.string(), "--sweep", "--plot", plot.string(), "--batches", "2", "--by", "masked"});
  ASSERT_EQ(out.code, 0) << out.err;
  // 8 heads in 2 layers of 4: 0 .. 6 removed, one per row.
  for (int removed = 0; removed <= 6; ++removed)
    EXPECT_TRUE(std::regex_search(out.out, std::regex("\\n\\s+" + std::to_string(removed) + "\\s+[0-9.]+\\s+\\[")))
        << removed << " removed: " << out.out;
  EXPECT_FALSE(std::regex_search(out.out, std::regex("\\n\\s+7\\s+[0-9.]+\\s+\\[")));
  expect_has(out.out, "+0.00%");  // nothing removed: the loss itself
  expect_has(out.out, "heads can go before the loss rises by more than 1% (removed in order of --by masked");
  EXPECT_TRUE(fs::exists(plot));
}

TEST_P(PruneCommand, BadRequestsExitTwoAndWriteNothing) {
  const fs::path pruned = tmp_.path() / "pruned.h5";
  auto out = run({"prune", dir_.string(), "--heads", "0.9", "--out", pruned.string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "at most 6 can go");
  out = run({"prune", dir_.string(), "--heads", "0.5"});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "--out");
  out = run({"prune", dir_.string(), "--heads", "0.5", "--out", (tmp_.path() / "pruned.txt").string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "must name an .h5 file");
  out = run({"prune", dir_.string(), "--heads", "1.5", "--out", pruned.string()});
  EXPECT_EQ(out.code, 2);
  out = run({"prune", dir_.string(), "--heads", "0.5", "--by", "size", "--out", pruned.string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "--by");
  out = run({"prune", dir_.string(), "--sweep", "--out", pruned.string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "--sweep writes no checkpoint");
  EXPECT_FALSE(fs::exists(pruned));
  tf::testing::write_file(pruned, "keep me");
  out = run({"prune", dir_.string(), "--heads", "0.25", "--out", pruned.string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "nothing is overwritten");
  EXPECT_EQ(tf::testing::read_file(pruned), "keep me");
}

// The files prune would write are checked before the heads are measured: a sweep's --plot in a folder
// that does not exist stops before the first row, and an --out that exists is refused before the text
// is read.
TEST_P(PruneCommand, OutputsAreCheckedBeforeTheHeadsAreMeasured) {
  const fs::path nowhere = tmp_.path() / "nowhere";
  auto out = run({"prune", dir_.string(), "--sweep", "--plot", (nowhere / "sweep.png").string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "error: prune --plot '" + (nowhere / "sweep.png").string() + "': the folder '" +
                          nowhere.string() + "' does not exist; expected a file in an existing folder that can be written");
  EXPECT_EQ(out.out, "") << "the sweep ran";
  out = run({"prune", dir_.string(), "--heads", "0.5", "--out", (nowhere / "pruned.h5").string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "error: prune --out '" + (nowhere / "pruned.h5").string() + "': the folder '" +
                          nowhere.string() + "' does not exist");
  EXPECT_EQ(out.out, "");
  EXPECT_FALSE(fs::exists(nowhere));
  const fs::path pruned = tmp_.path() / "pruned.h5";
  tf::testing::write_file(pruned, "keep me");
  out = run({"prune", dir_.string(), "--heads", "0.5", "--out", pruned.string(), "--text",
             (tmp_.path() / "missing.txt").string()});
  EXPECT_EQ(out.code, 2);
  expect_has(out.err, "error: prune: " + pruned.string() + " exists; choose another --out (nothing is overwritten)");
  EXPECT_EQ(tf::testing::read_file(pruned), "keep me");
}

// A pruned checkpoint that the disk refuses (a file size limit of half the checkpoint: EFBIG, as a
// full disk) is named in prune's own terms: no `--resume`, which prune does not take, and no run
// folder's checkpoint "kept"; nothing is left behind.
TEST_P(PruneCommand, AFullDiskIsNamedInPrunesTermsAndLeavesNothing) {
  const fs::path pruned = tmp_.path() / "pruned.h5";
  const auto limit = static_cast<rlim_t>(fs::file_size(dir_ / "ckpt_00000006.h5") / 2);
  const int code = tf::testing::run_tapeformer({"prune", dir_.string(), "--heads", "0.5", "--out", pruned.string()},
                                               tmp_.path() / "out.txt", tmp_.path() / "err.txt", {}, limit);
  const std::string err = tf::testing::read_file(tmp_.path() / "err.txt");
  EXPECT_EQ(code, 2) << err;
  expect_has(err, "error: prune: cannot save checkpoint '" + pruned.string() + "': cannot write '" + pruned.string() +
                      ".partial': " + std::strerror(EFBIG));
  expect_has(err, "; nothing was written (free space or fix the folder, then run prune again)");
  EXPECT_EQ(err.find("--resume"), std::string::npos) << err;
  EXPECT_EQ(err.find("is kept"), std::string::npos) << err;
  for (const char* name : {"pruned.h5", "pruned.h5.partial", "pruned.yaml"})
    EXPECT_FALSE(fs::exists(tmp_.path() / name)) << name;
}

INSTANTIATE_TEST_SUITE_P(Models, PruneCommand, ::testing::Values("tiny_gpt", "tiny_bert"));

}  // namespace
}  // namespace tf::inspect

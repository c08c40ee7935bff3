// `--threads N` on every command but train and prepare (whose recipe has train.threads): each
// command's --help offers it, a value outside [0, 1024] exits 2 naming it, it sets the count the
// command runs with (sample --timing reports it), and the figures do not depend on it.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

class ThreadsOption : public ::testing::Test {
 protected:
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  // A tiny GPT trained for a few steps by the program.
  fs::path trained_gpt() const {
    const fs::path text = tmp_.path() / "text.txt", dir = tmp_.path() / "gpt";
    tf::testing::write_file(text, tf::testing::english_text(8000));
    const auto o = run(tf::testing::train_args("tiny_gpt", text, dir, tmp_.path() / "cache",
                                               {"train.steps=4", "schedule.warmup_steps=1", "eval.interval=0"}));
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  }
  tf::testing::RunTempDir tmp_;
};

TEST_F(ThreadsOption, EveryCommandButTrainAndPrepareOffersIt) {
  for (const std::string command : {"sample", "fill", "eval", "info", "inspect", "heads", "prune", "plot", "report",
                                    "export", "gradcheck"}) {
    const auto help = run({command, "--help"});
    EXPECT_EQ(help.code, 0) << command;
    EXPECT_NE(help.out.find("--threads"), std::string::npos) << command << " --help:\n" << help.out;
  }
  for (const std::string command : {"train", "prepare"})  // train.threads, in the recipe or by --set
    EXPECT_EQ(run({command, "--help"}).out.find("--threads"), std::string::npos) << command;
  const auto bad = run({"info", "nowhere.h5", "--threads", "2000"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--threads: must be an integer in [0, 1024], got 2000"), std::string::npos) << bad.err;
}

TEST_F(ThreadsOption, SetsTheCountAndTheFiguresDoNotDependOnIt) {
  const fs::path gpt = trained_gpt();
  const std::regex timing(R"(timing: \d+ tokens after the first in [0-9.]+ s: [0-9.]+ tokens/s on (\d+) threads)");
  std::string tokens[2];
  for (int threads : {1, 2}) {
    const auto o = run({"sample", gpt.string(), "--prompt", "the ", "--tokens", "12", "--temperature", "0", "--timing",
                        "--threads", std::to_string(threads)});
    ASSERT_EQ(o.code, 0) << o.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(o.err, m, timing)) << o.err;
    // OMP_NUM_THREADS, when the environment sets it, wins over --threads (train/threads.h).
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      EXPECT_EQ(std::stoi(m[1]), threads);
    }
    tokens[threads - 1] = o.out;
  }
  EXPECT_EQ(tokens[0], tokens[1]) << "greedy decoding at 1 and 2 threads";
  // Without --threads, a model this small decodes on one thread (Note [decode threads]).
  const auto o = run({"sample", gpt.string(), "--prompt", "the ", "--tokens", "12", "--temperature", "0", "--timing"});
  ASSERT_EQ(o.code, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, timing)) << o.err;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    EXPECT_EQ(std::stoi(m[1]), 1);
  }
  EXPECT_EQ(o.out, tokens[0]);
  const std::regex loss(R"("loss": ([-0-9.eE+]+))");
  double losses[2];
  for (int threads : {1, 2}) {
    const auto o = run({"eval", gpt.string(), "--json", "--threads", std::to_string(threads)});
    ASSERT_EQ(o.code, 0) << o.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(o.out, m, loss)) << o.out;
    losses[threads - 1] = std::stod(m[1]);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-5 * std::abs(losses[0]));
}

}  // namespace
}  // namespace tf::train

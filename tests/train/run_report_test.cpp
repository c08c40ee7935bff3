// What `tapeformer train` tells its user at the end (train/progress.h, RunReport): the validation
// figure beside its context-free baseline, and next commands that run as printed. And the OpenMP
// wait policy the program applies to itself unless the user chose one (Note [OpenMP wait policy]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

#include "train/evaluate.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = tmp_ / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(6000));
  }
  std::vector<std::string> args(std::vector<std::string> more) const {
    return tf::testing::train_args("tiny_gpt", text_, tmp_ / "run", tmp_ / "cache", std::move(more));
  }
  // Runs `tapeformer ARGS` from `cwd` with the given OpenMP variables (empty: unset); stdout.
  std::string run(const std::vector<std::string>& a, const fs::path& cwd, const char* wait_policy = nullptr,
                  const char* spin_count = nullptr) {
    auto set = [](const char* name, const char* value) { value ? ::setenv(name, value, 1) : ::unsetenv(name); };
    set("OMP_WAIT_POLICY", wait_policy);
    set("GOMP_SPINCOUNT", spin_count);
    const int code = tf::testing::run_tapeformer(a, tmp_ / "out.txt", tmp_ / "err.txt", cwd);
    ::unsetenv("OMP_WAIT_POLICY");
    ::unsetenv("GOMP_SPINCOUNT");
    EXPECT_EQ(code, 0) << read_file(tmp_ / "err.txt");
    return read_file(tmp_ / "out.txt");
  }

  tf::testing::RunTempDir tmp_;
  fs::path text_;
};

TEST_F(RunReportTest, EndsWithTheFiguresAndNextCommandsThatRunAsPrinted) {
  // From the build folder, so the program is printed relative to it, as demo.sh's is.
  const fs::path build = fs::path(TAPEFORMER_BINARY).parent_path().parent_path();
  const std::string out = run(args({"train.steps=12", "eval.interval=6", "train.threads=1"}), build);

  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\ndone: 12 steps in \d+:\d\d, [0-9.]+k tokens/s on 1 thread\n)")))
      << out;
  // The validation figure is the last evaluation's, and the baseline is the unigram entropy of the
  // held-out text: positive, and at most log2 of the characters that occur in it.
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(eval at step 12: .* bits/char ([0-9.]+))"))) << out;
  const std::string last_eval = m[1];
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"(\nvalidation: ([0-9.]+) bits/char; a context-free \(unigram\) model needs ([0-9.]+)\n)")))
      << out;
  EXPECT_EQ(m[1].str(), last_eval);
  const double baseline = std::stod(m[2]);
  const std::string text = read_file(text_);
  const std::set<char> distinct(text.begin(), text.end());
  EXPECT_GT(baseline, 1.0);
  EXPECT_LE(baseline, std::log2(static_cast<double>(distinct.size())) + 1e-3);

  const std::string ckpt = (tmp_ / "run" / "ckpt_00000012.h5").string();
  EXPECT_NE(out.find("\ncheckpoints: " + (tmp_ / "run").string() + "/ (newest ckpt_00000012.h5)\n"), std::string::npos)
      << out;
  // Every suggested command, run by the shell from the same folder, as printed.
  const size_t next = out.find("\nnext:\n");
  ASSERT_NE(next, std::string::npos) << out;
  std::istringstream lines(out.substr(next + 7));
  std::vector<std::string> commands;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_EQ(line.rfind("  tools/tapeformer ", 0), 0u) << "not a command of the program, relative to build/: " << line;
    commands.push_back(line.substr(2));
  }
  ASSERT_EQ(commands.size(), 3u) << out;
  EXPECT_EQ(commands[0].rfind("tools/tapeformer sample " + ckpt + " --prompt ", 0), 0u) << commands[0];
  EXPECT_EQ(commands[1], "tools/tapeformer eval " + ckpt);
  EXPECT_EQ(commands[2], "tools/tapeformer info " + ckpt);
  for (const std::string& command : commands) {
    const std::string shell = "cd '" + build.string() + "' && " + command + " > '" + (tmp_ / "next.txt").string() + "' 2>&1";
    EXPECT_EQ(std::system(shell.c_str()), 0) << command << "\n" << read_file(tmp_ / "next.txt");
    EXPECT_FALSE(read_file(tmp_ / "next.txt").empty()) << command;
  }
}

TEST_F(RunReportTest, AppliesAShortSpinUnlessTheUserChoseAWaitPolicy) {
  std::vector<std::string> a = args({"train.steps=5"});
  a.push_back("--dry-run");
  std::smatch m;
  // Neither variable set: the program re-executed itself with its default spin count.
  const std::string chosen = run(a, {});
  ASSERT_TRUE(std::regex_search(chosen, m, std::regex(R"(\nopenmp waiting +GOMP_SPINCOUNT=(\d+) \(tapeformer's default)")))
      << chosen;
  const long spins = std::stol(m[1]);
  EXPECT_GT(spins, 0);
  EXPECT_LT(spins, 300000) << "no shorter than libgomp's own default: nothing was applied";
  // The user's choice, either variable, is left as it is.
  const std::string passive = run(a, {}, "PASSIVE");
  EXPECT_NE(passive.find("\nopenmp waiting        OMP_WAIT_POLICY=PASSIVE (yours)\n"), std::string::npos) << passive;
  const std::string spinning = run(a, {}, nullptr, "50000");
  EXPECT_NE(spinning.find("\nopenmp waiting        GOMP_SPINCOUNT=50000 (yours)\n"), std::string::npos) << spinning;
}

}  // namespace
}  // namespace tf::train

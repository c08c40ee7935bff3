// Note [signals on one thread] (train/interrupt.cpp): in a running `tapeformer`, SIGINT, SIGTERM and
// SIGHUP are blocked in every thread but one, so that a Ctrl-C's handler never runs on a thread
// that is inside a kernel (oneDNN 2.6's sgemm keeps data below its stack pointer, which a handler
// overwrites). And Ctrl-C still does what it did: training stops after the step with a checkpoint,
// any other command ends at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using testing::Child;

// The signal mask of each of the process's threads (SigBlk in /proc/<pid>/task/<tid>/status).
std::vector<uint64_t> blocked_masks(pid_t pid) {
  std::vector<uint64_t> masks;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0) masks.push_back(std::stoull(line.substr(7), nullptr, 16));
  }
  return masks;
}

bool wait_until(const std::function<bool()>& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(SignalThread, OneThreadReceivesCtrlCAndTrainingStillStopsWithACheckpoint) {
  testing::RunTempDir tmp;
  const fs::path text = tmp / "text.txt";
  std::ofstream(text) << testing::english_text(30000);
  // Two OpenMP threads, so that the workers exist while it trains.
  Child child(testing::train_args("tiny_gpt", text, tmp / "run", tmp / "cache",
                                  {"train.steps=100000", "train.threads=2", "checkpoint.interval=0"}),
              tmp / "out.txt", tmp / "err.txt");
  ASSERT_TRUE(wait_until([&] { return testing::read_metrics(tmp / "run/metrics.jsonl").size() >= 3 || child.exited(); }, 60))
      << testing::read_file(tmp / "err.txt");
  ASSERT_FALSE(child.exited()) << testing::read_file(tmp / "err.txt");
  const uint64_t handled = (uint64_t{1} << (SIGINT - 1)) | (uint64_t{1} << (SIGTERM - 1)) | (uint64_t{1} << (SIGHUP - 1));
  const std::vector<uint64_t> masks = blocked_masks(child.pid());
  int receiving = 0, blocking = 0;
  for (uint64_t mask : masks) {
    if ((mask & handled) == 0) ++receiving;
    if ((mask & handled) == handled) ++blocking;
  }
  EXPECT_GE(masks.size(), 3u) << "the main thread, an OpenMP worker and the signal thread";
  EXPECT_EQ(receiving, 1) << "threads that can receive SIGINT, SIGTERM and SIGHUP";
  EXPECT_EQ(blocking, static_cast<int>(masks.size()) - 1) << "threads that block all three";

  ::kill(child.pid(), SIGINT);
  const int status = child.wait();
  ASSERT_TRUE(WIFEXITED(status)) << testing::read_file(tmp / "err.txt");
  EXPECT_EQ(WEXITSTATUS(status), 130) << testing::read_file(tmp / "err.txt");
  EXPECT_NE(testing::read_file(tmp / "out.txt").find("interrupted: checkpoint written to"), std::string::npos)
      << testing::read_file(tmp / "out.txt");

  // Any other command: Ctrl-C ends it at once, killed by the signal as before.
  Child sample({"sample", (tmp / "run").string(), "--tokens", "1000000", "--prompt", "The "}, tmp / "sample.txt",
               tmp / "sample_err.txt");
  // It samples for some 20 s; a signal at any moment of it, start included, must end it.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_FALSE(sample.exited()) << testing::read_file(tmp / "sample_err.txt");
  ::kill(sample.pid(), SIGINT);
  const int sample_status = sample.wait();
  ASSERT_TRUE(WIFSIGNALED(sample_status)) << testing::read_file(tmp / "sample_err.txt");
  EXPECT_EQ(WTERMSIG(sample_status), SIGINT);
}

}  // namespace
}  // namespace tf::train

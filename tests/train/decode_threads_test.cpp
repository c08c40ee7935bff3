// Note [decode threads] (train/threads.cpp): batch-1 decoding at the default thread count runs one
// thread for a small model, and otherwise one per core that other processes leave free; a count the
// user chose is kept. Busy child processes stand in for the other processes.
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "train/threads.h"

namespace tf::train {
namespace {

// `count` child processes that spin until killed; they are runnable from the moment they start.
class BusyProcesses {
 public:
  explicit BusyProcesses(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0)
        for (;;) asm volatile("" ::: "memory");  // a loop the compiler keeps
      pids_.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ~BusyProcesses() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

 private:
  std::vector<pid_t> pids_;
};

class DecodeThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("OMP_NUM_THREADS") != nullptr) GTEST_SKIP() << "OMP_NUM_THREADS chooses the count here";
  }
  void TearDown() override { configure_threads(0); }
};

TEST_F(DecodeThreads, ASmallModelDecodesOnOneThread) {
  configure_threads(0);
  EXPECT_EQ(configure_decode_threads(kParallelDecodeParameters - 1), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
}

TEST_F(DecodeThreads, ALargerModelTakesTheCoresOthersLeaveFree) {
  configure_threads(0);
  const int cores = configure_threads(0);  // the physical cores
  {
    // As many busy processes as logical CPUs: no core is free, so one thread.
    BusyProcesses busy(omp_get_num_procs());
    EXPECT_GE(other_runnable_threads(), omp_get_num_procs());
    EXPECT_EQ(configure_decode_threads(10'000'000), 1);
  }
  // Without them: between 1 and the physical cores, and all of them when nothing else was running.
  const int before = other_runnable_threads();
  const int threads = configure_decode_threads(10'000'000);
  const int after = other_runnable_threads();
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, cores);
  if (before == 0 && after == 0) {
    EXPECT_EQ(threads, cores);
  }
}

TEST_F(DecodeThreads, ACountTheUserChoseIsKept) {
  configure_threads(3);
  EXPECT_EQ(configure_decode_threads(kParallelDecodeParameters - 1), 3);
  BusyProcesses busy(omp_get_num_procs());
  EXPECT_EQ(configure_decode_threads(10'000'000), 3);
}

}  // namespace
}  // namespace tf::train

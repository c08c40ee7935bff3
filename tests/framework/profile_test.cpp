// The op profiler (framework/autograd/profile.h): every recorded op is counted once forward and
// once backward, under its own name, and a scope's time lands in its own row.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "framework/autograd/profile.h"
#include "framework/autograd/tape.h"
#include "framework/ops/matmul.h"
#include "framework/ops/reduce.h"
#include "framework/tensor.h"

namespace tf {
namespace {

// The calls column of the report's row for (name, phase), or -1 when the row is missing.
long long calls_of(const std::string& report, const std::string& name, const std::string& phase) {
  std::istringstream lines(report);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string n, p;
    long long calls = -1;
    if (fields >> n >> p >> calls && n == name && p == phase) return calls;
  }
  return -1;
}

struct ProfileOn {
  explicit ProfileOn(profile::Clock clock) {
    profile::reset();
    profile::enable(true, clock);
  }
  ~ProfileOn() {
    profile::enable(false);
    profile::reset();
  }
};

TEST(Profile, CountsEachRecordedOpForwardAndBackward) {
  ProfileOn on(profile::Clock::wall);
  Tensor a = Tensor::full({4, 5}, 0.5).set_requires_grad();
  Tensor b = Tensor::full({5, 3}, 2.0).set_requires_grad();
  for (int i = 0; i < 3; ++i) backward(ops::sum(ops::matmul(a, b)));
  const std::string report = profile::report();
  EXPECT_EQ(calls_of(report, "matmul", "forward"), 3) << report;
  EXPECT_EQ(calls_of(report, "matmul", "backward"), 3) << report;
  EXPECT_EQ(calls_of(report, "sum", "forward"), 3) << report;
  EXPECT_EQ(calls_of(report, "sum", "backward"), 3) << report;
}

TEST(Profile, ScopeTimesItsRegionAndNothingIsRecordedWhenOff) {
  {
    ProfileOn on(profile::Clock::wall);
    {
      profile::Scope scope("sleeping");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(calls_of(profile::report(), "sleeping", "other"), 1);
    EXPECT_GE(profile::total_seconds(), 0.019);
  }
  Tensor a = Tensor::full({2, 2}, 1.0).set_requires_grad();
  backward(ops::sum(ops::matmul(a, a)));  // profiling is off again: nothing is added
  EXPECT_EQ(profile::total_seconds(), 0.0);
  EXPECT_EQ(calls_of(profile::report(), "matmul", "forward"), -1);
}

TEST(Profile, CpuClockDoesNotCountSleep) {
  ProfileOn on(profile::Clock::cpu);
  {
    profile::Scope scope("sleeping");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(profile::total_seconds(), 0.025);  // sleeping costs (almost) no CPU time
}

}  // namespace
}  // namespace tf

// The progress line's rule (docs/recipes.md, "log"): off a terminal, a plain line every 5% of the
// run and at its last step, whatever log.interval is.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "train/progress.h"

namespace tf::train {
namespace {

// The steps at which a run of `total` steps prints a progress line when its output is not a terminal.
std::vector<int64_t> printed_steps(int64_t total) {
  std::ostringstream out;
  Progress progress(out, total, /*terminal=*/false);
  for (int64_t step = 1; step <= total; ++step) progress.update(step, 2.5, 1e-3, 100);
  std::vector<int64_t> steps;
  const std::string text = out.str();
  const std::regex line(R"(step (\d+)/(\d+)  loss )");
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) steps.push_back(std::stoll((*it)[1]));
  return steps;
}

TEST(Progress, OffATerminalALineComesEveryTwentiethOfTheRunAndAtItsEnd) {
  std::vector<int64_t> expected;
  for (int64_t s = 7; s <= 140; s += 7) expected.push_back(s);
  EXPECT_EQ(printed_steps(140), expected);  // the example in docs/recipes.md
  expected = {50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800, 850, 900, 950, 1000};
  EXPECT_EQ(printed_steps(1000), expected);
  EXPECT_EQ(printed_steps(45), (std::vector<int64_t>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34,
                                                     36, 38, 40, 42, 44, 45}));  // the last step too
  EXPECT_EQ(printed_steps(3), (std::vector<int64_t>{1, 2, 3}));  // below 40 steps: every step
}

// A time budget fixes the count after warm-up: from then on the twentieth is of the new count.
TEST(Progress, AFixedCountChangesTheSpacing) {
  std::ostringstream out;
  Progress progress(out, 100000, /*terminal=*/false);
  for (int64_t step = 1; step <= 10; ++step) progress.update(step, 2.5, 1e-3, 100);
  EXPECT_EQ(out.str(), "");  // 5,000 steps apart while the count is train.steps = 100,000
  progress.set_total(60);
  for (int64_t step = 11; step <= 60; ++step) progress.update(step, 2.5, 1e-3, 100);
  EXPECT_NE(out.str().find("step 12/60 "), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("step 13/60 "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("step 60/60 "), std::string::npos) << out.str();
}

}  // namespace
}  // namespace tf::train

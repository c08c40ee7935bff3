// The headless Chromium harness that checks report.html (report_test, Report.RendersInHeadlessChromium)
// is shown to fail where it should: a page with a console error and an uncaught exception is reported,
// a blank page is judged blank, and a page that never finishes loading is stopped at the time limit.
#include "inspect/headless_chromium.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace tf::testing {
namespace {

class HeadlessChromium : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << kChromiumMissing;
  }
  Rendering render(const std::string& html, std::chrono::seconds limit = std::chrono::seconds(90)) {
    write_file(tmp_ / "page.html", html);
    return render_in_chromium(chromium_, tmp_ / "page.html", tmp_ / "chromium", {400, 300}, limit);
  }
  std::filesystem::path chromium_;
  TempDir tmp_;
};

TEST_F(HeadlessChromium, AConsoleErrorAndAnUncaughtExceptionAreReported) {
  const Rendering r = render(
      "<!doctype html><html><body><p>A page made to fail.</p>"
      "<script>console.error('deliberate console error'); notAFunction();</script></body></html>");
  ASSERT_TRUE(r.finished) << r.why;
  ASSERT_EQ(r.console.size(), 2u);
  EXPECT_NE(r.console[0].find("deliberate console error"), std::string::npos) << r.console[0];
  EXPECT_NE(r.console[1].find("Uncaught ReferenceError: notAFunction is not defined"), std::string::npos)
      << r.console[1];
  const Screenshot s = measure_screenshot(r.screenshot);
  EXPECT_EQ(s.width, 400);
  EXPECT_EQ(s.height, 300);
  EXPECT_GT(s.ink_share, 0.0);  // the paragraph's text
}

TEST_F(HeadlessChromium, ABlankPageIsJudgedBlank) {
  const Rendering r = render("<!doctype html><html><body></body></html>");
  ASSERT_TRUE(r.finished) << r.why;
  EXPECT_TRUE(r.console.empty());
  const Screenshot s = measure_screenshot(r.screenshot);
  EXPECT_EQ(s.width, 400);
  EXPECT_EQ(s.height, 300);
  EXPECT_EQ(s.ink_share, 0.0);
  EXPECT_EQ(s.tinted_share, 0.0);
}

TEST_F(HeadlessChromium, APageThatNeverLoadsIsStoppedAtTheTimeLimit) {
  const auto start = std::chrono::steady_clock::now();
  const Rendering r = render("<!doctype html><html><body><script>for (;;) {}</script></body></html>",
                             std::chrono::seconds(5));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.finished);
  EXPECT_NE(r.why.find("did not finish within 5 s"), std::string::npos) << r.why;
  EXPECT_LT(seconds, 15.0);  // the limit and the 5 s grace for SIGTERM
}

}  // namespace
}  // namespace tf::testing

// inspect/plot and `tapeformer plot`: round tick values, a chart that decodes to its reported size
// and holds its curves, and the command on real run folders (one run, two overlaid, bad input).
#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "inspect/plot.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

namespace fs = std::filesystem;

TEST(NiceTicks, RoundValuesCoveringTheRange) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(1, 2000, 8), (std::vector<double>{500, 1000, 1500, 2000}));
  const std::vector<double> small = nice_ticks(1.43, 3.91, 5);  // step 0.5
  ASSERT_EQ(small.size(), 5u);
  EXPECT_DOUBLE_EQ(small.front(), 1.5);
  EXPECT_DOUBLE_EQ(small.back(), 3.5);
  const std::vector<double> rates = nice_ticks(0.0002, 0.002, 5);  // step 5e-4
  EXPECT_NEAR(rates[0], 5e-4, 1e-15);
  EXPECT_NEAR(rates[1] - rates[0], 5e-4, 1e-15);
  const std::vector<double> across = nice_ticks(-1, 1, 4);
  EXPECT_EQ(across[2], 0.0);  // an exact zero, not 1e-17
}

// Pixels of about the given colour (RGB, each channel within 10: cairo rounds and antialiases), in
// a decoded PNG.
size_t count_colour(const fs::path& file, uint32_t rgb, int* width, int* height) {
  cairo_surface_t* image = cairo_image_surface_create_from_png(file.c_str());
  EXPECT_EQ(cairo_surface_status(image), CAIRO_STATUS_SUCCESS);
  *width = cairo_image_surface_get_width(image);
  *height = cairo_image_surface_get_height(image);
  const unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  size_t n = 0;
  for (int y = 0; data && y < *height; ++y)
    for (int x = 0; x < *width; ++x) {
      const uint32_t pixel = reinterpret_cast<const uint32_t*>(data + y * stride)[x];
      bool near = true;
      for (int shift : {0, 8, 16}) near = near && std::abs(int((pixel >> shift) & 0xff) - int((rgb >> shift) & 0xff)) <= 10;
      n += near;
    }
  cairo_surface_destroy(image);
  return n;
}

TEST(LineChart, DecodesToItsSizeAndDrawsEachRunInItsColour) {
  tf::testing::TempDir tmp;
  Series a{"a", {}, {}, 0}, b{"b", {}, {}, 1};
  for (int i = 0; i <= 100; ++i) {
    a.x.push_back(i), a.y.push_back(std::exp(-i / 30.0));
    b.x.push_back(i), b.y.push_back(i == 50 ? std::nan("") : 0.5 + 0.3 * std::sin(i / 10.0));
  }
  const PictureSize size = write_line_chart(tmp.path() / "c.png", "two curves", "step", {{"panel", "units", {a, b}}});
  int width = 0, height = 0;
  // The palette's first two colours, drawn opaque: (0.12, 0.47, 0.71) and (0.84, 0.15, 0.16).
  const size_t blue = count_colour(tmp.path() / "c.png", 0x1f78b5, &width, &height);
  const size_t red = count_colour(tmp.path() / "c.png", 0xd62629, &width, &height);
  EXPECT_EQ(width, size.width);
  EXPECT_EQ(height, size.height);
  EXPECT_GT(blue, 200u) << "the first run's curve";
  EXPECT_GT(red, 200u) << "the second run's curve";
}

class PlotCommand : public ::testing::Test {
 protected:
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  fs::path train_run(const std::string& name, const std::string& recipe) {
    tf::testing::write_file(tmp_.path() / "text.txt", tf::testing::english_text(6000));
    const fs::path dir = tmp_.path() / name;
    const auto o = run(tf::testing::train_args(recipe, tmp_.path() / "text.txt", dir, tmp_.path() / "cache",
                                               {"train.steps=6", "eval.interval=3", "eval.batches=1"}));
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  }
  tf::testing::RunTempDir tmp_;
};

TEST_F(PlotCommand, DrawsOneRunOrSeveralAndRefusesAFolderWithoutMetrics) {
  const fs::path gpt = train_run("gpt", "tiny_gpt"), bert = train_run("bert", "tiny_bert");
  auto o = run({"plot", gpt.string()});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(gpt / "curves.png"));
  const fs::path both = tmp_.path() / "both.png";
  o = run({"plot", gpt.string(), bert.string(), "--out", both.string()});
  ASSERT_EQ(o.code, 0) << o.err;
  int width = 0, height = 0;
  EXPECT_GT(count_colour(both, 0xd62629, &width, &height), 100u) << "the second run is drawn";
  // Loss, bits/char (the GPT), accuracy (the BERT), learning rate: four panels are taller than two.
  int one_width = 0, one_height = 0;
  count_colour(gpt / "curves.png", 0, &one_width, &one_height);
  EXPECT_GT(height, one_height);

  fs::create_directories(tmp_.path() / "empty_run");
  o = run({"plot", (tmp_.path() / "empty_run").string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find((tmp_.path() / "empty_run" / "metrics.jsonl").string() + ": cannot read the metrics log"),
            std::string::npos) << o.err;
  tf::testing::write_file(tmp_.path() / "empty_run" / "metrics.jsonl", "{\"step\": 1, \"train_loss\": 2.5}\nnot json\n");
  o = run({"plot", (tmp_.path() / "empty_run").string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("metrics.jsonl:2: not a metrics record"), std::string::npos) << o.err;
}

// A record whose step or loss is not a number is refused with its file and line (it used to be drawn
// at x = NaN, or left out without a word), by plot and by report alike.
TEST_F(PlotCommand, ARecordWhoseStepOrLossIsNotANumberIsNamedByLine) {
  const fs::path dir = tmp_.path() / "edited";
  const fs::path log = dir / "metrics.jsonl";
  tf::testing::write_file(log, "{\"step\": 1, \"train_loss\": 2.5}\n{\"step\": \"two\", \"train_loss\": 2.4}\n");
  auto o = run({"plot", dir.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: " + log.string() + ":2: \"step\" must be a whole number >= 0 (the optimizer steps "
                       "done), got the string \"two\""),
            std::string::npos) << o.err;
  tf::testing::write_file(log, "{\"step\": 1, \"train_loss\": 2.5}\n{\"step\": 2, \"train_loss\": \"2.4\"}\n");
  o = run({"plot", dir.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: " + log.string() + ":2: \"train_loss\" must be a number or null, got the string \"2.4\""),
            std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir / "curves.png"));

  const fs::path gpt = train_run("gpt", "tiny_gpt");
  std::ofstream(gpt / "metrics.jsonl", std::ios::app) << "{\"step\": 7, \"train_loss\": 2.1, \"val_loss\": \"n/a\"}\n";
  const size_t line = tf::testing::read_metrics(gpt / "metrics.jsonl").size();
  o = run({"report", gpt.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: " + (gpt / "metrics.jsonl").string() + ":" + std::to_string(line) +
                       ": \"val_loss\" must be a number or null, got the string \"n/a\""),
            std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(gpt / "report.html"));
}

// --out is checked before any log is read: a folder that does not exist, or a folder given as the
// file, is named with the option, even when the run folders could not be plotted anyway.
TEST_F(PlotCommand, AnOutputThatCannotBeWrittenIsRefusedBeforeTheLogsAreRead) {
  const fs::path nowhere = tmp_.path() / "nowhere" / "c.png";
  fs::create_directories(tmp_.path() / "empty_run");  // no metrics.jsonl
  auto o = run({"plot", (tmp_.path() / "empty_run").string(), "--out", nowhere.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: plot --out '" + nowhere.string() + "': the folder '" +
                       (tmp_.path() / "nowhere").string() + "' does not exist; expected a file in an existing folder "
                       "that can be written"),
            std::string::npos) << o.err;
  o = run({"plot", (tmp_.path() / "empty_run").string(), "--out", tmp_.path().string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: plot --out '" + tmp_.path().string() + "' is a folder; expected the name of a file"),
            std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(tmp_.path() / "nowhere"));
  // Without --out, a missing run folder is named by its log, not by the default output beside it.
  o = run({"plot", (tmp_.path() / "no_run").string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find((tmp_.path() / "no_run" / "metrics.jsonl").string() + ": cannot read the metrics log"),
            std::string::npos) << o.err;
}

}  // namespace
}  // namespace tf::inspect

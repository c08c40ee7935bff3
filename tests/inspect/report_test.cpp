// report.html: base64 against RFC 4648's test vectors; the report of a GPT run (written by `train`
// with log.report) and of a BERT run (`tapeformer report`) holds its sections, embeds pictures that
// decode, refers to nothing outside itself, and leaves no scratch files; and the GPT run's report
// renders in headless Chromium (a screenshot that is not blank, no console message).
#include "inspect/report.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "inspect/headless_chromium.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

namespace fs = std::filesystem;

TEST(Base64, Rfc4648TestVectors) {  // RFC 4648, section 10
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\x00\x80", 3)), "/wCA");
}

// Decodes base64 (written here independently of the encoder) and reads the bytes as a PNG: true
// when cairo's PNG reader accepts them and the picture has a size.
bool decodes_as_png(const std::string& text) {
  std::string bytes;
  uint32_t group = 0;
  int bits = 0;
  for (char c : text) {
    const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = std::strchr(digits, c);
    if (c == '=' || !at) break;
    group = group << 6 | static_cast<uint32_t>(at - digits);
    bits += 6;
    if (bits >= 8) bytes += static_cast<char>((group >> (bits -= 8)) & 0xff);
  }
  struct Reader {
    const std::string* bytes;
    size_t at = 0;
  } reader{&bytes};
  cairo_surface_t* image = cairo_image_surface_create_from_png_stream(
      [](void* closure, unsigned char* data, unsigned int length) {
        auto* r = static_cast<Reader*>(closure);
        if (r->at + length > r->bytes->size()) return CAIRO_STATUS_READ_ERROR;
        std::memcpy(data, r->bytes->data() + r->at, length);
        r->at += length;
        return CAIRO_STATUS_SUCCESS;
      },
      &reader);
  const bool ok = cairo_surface_status(image) == CAIRO_STATUS_SUCCESS && cairo_image_surface_get_width(image) > 100;
  cairo_surface_destroy(image);
  return ok;
}

class Report : public ::testing::Test {
 protected:
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  fs::path train_run(const std::string& recipe, const std::vector<std::string>& sets) {
    tf::testing::write_file(tmp_.path() / "text.txt", tf::testing::english_text(6000));
    const fs::path dir = tmp_.path() / recipe;
    std::vector<std::string> all = {"train.steps=6", "eval.interval=3", "eval.batches=1"};
    all.insert(all.end(), sets.begin(), sets.end());
    const auto o = run(tf::testing::train_args(recipe, tmp_.path() / "text.txt", dir, tmp_.path() / "cache", all));
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  }
  // The report's pictures: each data: URI's payload. (Found with find, not std::regex, whose matcher
  // recurses per character and overflows the stack on a picture's 50 kB of base64.)
  static std::vector<std::string> pictures(const std::string& html) {
    std::vector<std::string> out;
    const std::string prefix = "src=\"data:image/png;base64,";
    for (size_t at = html.find(prefix); at != std::string::npos; at = html.find(prefix, at)) {
      at += prefix.size();
      const size_t end = html.find('"', at);
      out.push_back(html.substr(at, end - at));
    }
    return out;
  }
  static void expect_self_contained(const std::string& html) {
    EXPECT_EQ(html.find("http:"), std::string::npos);
    EXPECT_EQ(html.find("https:"), std::string::npos);
    EXPECT_EQ(html.find("<script"), std::string::npos);
    size_t references = 0;
    for (const std::string attribute : {"src=\"", "href=\""})
      for (size_t at = html.find(attribute); at != std::string::npos; at = html.find(attribute, at + 1), ++references)
        EXPECT_EQ(html.compare(at + attribute.size(), 5, "data:"), 0) << "a reference outside the file";
    EXPECT_GE(references, 1u);
  }
  tf::testing::RunTempDir tmp_;
};

TEST_F(Report, TrainingWritesAGptRunsReport) {
  const fs::path dir = train_run("tiny_gpt", {"log.report=true", "sample.tokens=20"});
  const std::string html = tf::testing::read_file(dir / "report.html");
  for (const char* section : {"<h2>Training curves</h2>", "<h2>Last evaluation</h2>", "bits per character",
                              "<h2>Sample</h2>", "<h2>Attention</h2>", "<h2>Recipe</h2>", "d_model: 32"})
    EXPECT_NE(html.find(section), std::string::npos) << section;
  const std::vector<std::string> images = pictures(html);
  ASSERT_EQ(images.size(), 2u);  // curves, attention overview
  for (const std::string& image : images) EXPECT_TRUE(decodes_as_png(image));
  // One row per head: 2 layers x 2 heads of tiny_gpt.
  const std::regex head_row("<tr><td>\\d+</td><td>\\d+</td>");
  EXPECT_EQ(std::distance(std::sregex_iterator(html.begin(), html.end(), head_row), std::sregex_iterator()), 4);
  expect_self_contained(html);
  EXPECT_FALSE(fs::exists(dir / "report-picture.png"));
}

// A model whose layers are all Mamba forms no attention weights: the report says so and draws the
// curves alone.
TEST_F(Report, AModelWithoutAttentionLayersSaysSo) {
  const fs::path dir = train_run("tiny_gpt", {"log.report=true", "model.mixer=mamba", "model.position=none"});
  const std::string html = tf::testing::read_file(dir / "report.html");
  EXPECT_NE(html.find("No layer of this model forms attention weights"), std::string::npos);
  EXPECT_NE(html.find("<h2>Recipe</h2>"), std::string::npos);
  EXPECT_EQ(pictures(html).size(), 1u);  // the curves
}

TEST_F(Report, TheReportCommandWritesABertRunsReport) {
  const fs::path dir = train_run("tiny_bert", {});
  EXPECT_FALSE(fs::exists(dir / "report.html"));  // log.report is off by default
  const fs::path out = tmp_.path() / "bert.html";
  const auto o = run({"report", dir.string(), "--out", out.string()});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string html = tf::testing::read_file(out);
  EXPECT_NE(html.find("masked-token accuracy"), std::string::npos);
  EXPECT_EQ(html.find("<h2>Sample</h2>"), std::string::npos);  // a BERT does not generate
  EXPECT_NE(html.find("<h2>Attention</h2>"), std::string::npos);
  for (const std::string& image : pictures(html)) EXPECT_TRUE(decodes_as_png(image));
  expect_self_contained(html);
  EXPECT_NE(html.find("always guessing the most frequent token"), std::string::npos);
  // Five stretches of the validation text, one token masked in each: the first row's candidates are
  // what `tapeformer fill` gives for the same text.
  const std::regex row(R"re(<tr class="fill"><td style="text-align:left"><code>([\s\S]*?)<b>\[MASK\]</b>([\s\S]*?)</code></td><td><code>([\s\S]*?)</code></td><td><code>([\s\S]*?)</code> ([0-9.]+) )re");
  std::vector<std::smatch> rows(std::sregex_iterator(html.begin(), html.end(), row), std::sregex_iterator());
  ASSERT_EQ(rows.size(), 5u);
  const auto unescape = [](std::string t) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
      for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + 1)) t.replace(at, from.size(), to);
    return t;
  };
  const std::string text = unescape(rows[0][1].str()) + "[MASK]" + unescape(rows[0][2].str());
  EXPECT_EQ(text.size(), 30u + 5u);  // 30 characters (tiny_bert: max_seq_len 32 less [CLS] and [SEP]), one as "[MASK]"
  const auto fill = run({"fill", dir.string(), "--text", text, "--top-k", "1"});
  ASSERT_EQ(fill.code, 0) << fill.err;
  std::smatch first;
  ASSERT_TRUE(std::regex_search(fill.out, first, std::regex(R"( +1 +([0-9.]+) +\d+ +(\S+))"))) << fill.out;
  EXPECT_NEAR(std::stod(first[1]), std::stod(rows[0][5]), 6e-4) << fill.out;
  EXPECT_EQ(first[2].str(), unescape(rows[0][4].str()));
  EXPECT_NE(html.find("First guess right in "), std::string::npos);
  // A folder without a run is refused.
  fs::create_directories(tmp_.path() / "nothing");
  EXPECT_EQ(run({"report", (tmp_.path() / "nothing").string()}).code, 2);
}

// --out is checked before the checkpoint is loaded and the report drawn: nothing is computed or written
// for a file that could not be written, and the error names the option.
TEST_F(Report, AnOutputThatCannotBeWrittenIsRefusedBeforeTheWork) {
  const fs::path dir = train_run("tiny_gpt", {});
  const fs::path nowhere = tmp_.path() / "nowhere" / "r.html";
  auto o = run({"report", dir.string(), "--out", nowhere.string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: report --out '" + nowhere.string() + "': the folder '" +
                       (tmp_.path() / "nowhere").string() + "' does not exist"),
            std::string::npos) << o.err;
  // Checked before the checkpoint is looked for: a folder without one is not what is named.
  fs::create_directories(tmp_.path() / "nothing");
  o = run({"report", (tmp_.path() / "nothing").string(), "--out", tmp_.path().string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("error: report --out '" + tmp_.path().string() + "' is a folder"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(tmp_.path() / "report-picture.png"));
}

// What a reader sees: the page as Chromium draws it. headless_chromium_test shows that the harness
// reports a console error and judges a blank page blank.
TEST_F(Report, RendersInHeadlessChromium) {
  const fs::path chromium = tf::testing::find_chromium();
  if (chromium.empty()) GTEST_SKIP() << tf::testing::kChromiumMissing;
  const fs::path dir = train_run("tiny_gpt", {"log.report=true", "sample.tokens=20"});
  const tf::testing::Rendering r =
      tf::testing::render_in_chromium(chromium, dir / "report.html", tmp_.path() / "chromium", {1000, 4000});
  ASSERT_TRUE(r.finished) << r.why;
  for (const std::string& line : r.console) ADD_FAILURE() << "console: " << line;
  const tf::testing::Screenshot s = tf::testing::measure_screenshot(r.screenshot);
  EXPECT_EQ(s.width, 1000);
  EXPECT_EQ(s.height, 4000);  // the whole page, about 3,500 pixels high
  // Measured: 0.35 of the window is not background, 0.0019 is coloured (curves, maps). With the
  // pictures' data broken the coloured share falls to 0.00006 (the broken-image icons), without them to 0.
  EXPECT_GT(s.ink_share, 0.05);
  EXPECT_GT(s.tinted_share, 0.0005) << "the pictures did not render";
}

}  // namespace
}  // namespace tf::inspect

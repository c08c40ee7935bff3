// train/metrics_log: numbers (in every form the trainer writes), nulls and strings; an unfinished
// last line is not a record; a malformed line is named by file and line.
#include "train/metrics_log.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/error.h"
#include "support/errors.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

TEST(MetricsLog, ReadsNumbersNullsAndStrings) {
  tf::testing::RunTempDir tmp;
  const auto file = tmp.path() / "metrics.jsonl";
  tf::testing::write_file(file,
                          "{\"step\": 1, \"train_loss\": 4.1743998527526855, \"val_loss\": null, \"lr\": 1e-05, "
                          "\"run\": \"0123456789abcdef\"}\n"
                          "{\"step\": 2, \"tokens_per_s\": 12345.5, \"elapsed_s\": 0.25}\n"
                          "{\"step\": 3, \"train_lo");  // a process killed mid-write
  const std::vector<MetricsRecord> records = read_metrics_log(file);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].number("step"), 1);
  EXPECT_EQ(records[0].number("train_loss"), 4.1743998527526855);
  EXPECT_TRUE(std::isnan(records[0].number("val_loss")));
  EXPECT_EQ(records[0].number("lr"), 1e-05);
  EXPECT_EQ(records[0].texts.at("run"), "0123456789abcdef");
  EXPECT_EQ(records[1].number("tokens_per_s"), 12345.5);
  EXPECT_TRUE(std::isnan(records[1].number("absent")));
}

TEST(MetricsLog, AMalformedLineIsNamed) {
  tf::testing::RunTempDir tmp;
  const auto file = tmp.path() / "metrics.jsonl";
  for (const char* bad : {"{\"step\": 1,}\n", "{\"step\": one}\n", "[1, 2]\n", "{\"step\": 1} trailing\n"}) {
    tf::testing::write_file(file, std::string("{\"step\": 0}\n") + bad);
    EXPECT_NE(tf::testing::error_message<InputError>([&] { read_metrics_log(file); }).find(file.string() + ":2: not a metrics record"),
              std::string::npos)
        << bad;
  }
}

// plot and report draw and quote these fields as numbers: a step that is not a whole number, or a
// figure given as a string, is named by file, line and field. nan and inf are not JSON numbers.
TEST(MetricsLog, AFieldThatIsNotANumberIsNamedWithItsLine) {
  tf::testing::RunTempDir tmp;
  const auto file = tmp.path() / "metrics.jsonl";
  const std::string at = file.string() + ":2: ";
  const std::string step = "\"step\" must be a whole number >= 0 (the optimizer steps done), got ";
  for (const auto& [line, said] : std::vector<std::pair<std::string, std::string>>{
           {"{\"step\": \"3\", \"train_loss\": 2.5}", at + step + "the string \"3\""},
           {"{\"step\": null, \"train_loss\": 2.5}", at + step + "null"},
           {"{\"train_loss\": 2.5}", at + step + "no \"step\" field"},
           {"{\"step\": 2.5}", at + step + "2.5"},
           {"{\"step\": -1}", at + step + "-1"},
           {"{\"step\": 2, \"train_loss\": \"high\"}", at + "\"train_loss\" must be a number or null, got the string \"high\""},
           {"{\"step\": 2, \"lr\": \"3e-4\"}", at + "\"lr\" must be a number or null, got the string \"3e-4\""},
           {"{\"step\": 2, \"train_loss\": nan}", at + "not a metrics record"},
           {"{\"step\": 2, \"val_loss\": -inf}", at + "not a metrics record"},
           {"{\"step\": 2, \"lr\": .5}", at + "not a metrics record"}}) {
    tf::testing::write_file(file, "{\"step\": 1, \"train_loss\": 3, \"val_loss\": null, \"run\": \"ab\"}\n" + line + "\n");
    const std::string message = tf::testing::error_message<InputError>([&] { read_metrics_log(file); });
    EXPECT_EQ(message.rfind(said, 0), 0u) << line << "\n" << message;
  }
}

}  // namespace
}  // namespace tf::train

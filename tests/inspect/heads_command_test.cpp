// `tapeformer heads` on tiny trained GPT and BERT checkpoints: the table and the JSON hold every head
// once, most important first, each layer's importances of l2 norm 1, the unmasked loss equal to
// `tapeformer eval`'s on the same batches; bad input exits 2 with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

namespace fs = std::filesystem;

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

// The number after "key": in a flat JSON text (the first one, or the first after `from`).
double json_value(const std::string& json, const std::string& key, size_t from = 0) {
  const size_t at = json.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return std::nan("");
  return std::stod(json.substr(at + key.size() + 4));
}

struct HeadRow {
  int64_t layer, head;
  double importance, raw, masked, delta;
};

std::vector<HeadRow> heads_of(const std::string& json) {
  std::vector<HeadRow> rows;
  const std::regex row(R"(\{"layer": (\d+), "head": (\d+), "importance": ([^,]+), "raw_importance": ([^,]+), )"
                       R"("masked_loss": ([^,]+), "loss_delta": ([^}]+)\})");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), row); it != std::sregex_iterator(); ++it)
    rows.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4]),
                    std::stod((*it)[5]), std::stod((*it)[6])});
  return rows;
}

class HeadsCommand : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    text_ = tmp_.path() / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(8000));
    const auto args = tf::testing::train_args(GetParam(), text_, dir_, tmp_.path() / "cache",
                                              {"train.steps=6", "schedule.warmup_steps=2", "eval.interval=0"});
    ASSERT_EQ(run(args).code, 0) << tf::testing::read_file(tmp_.path() / "err.txt");
  }
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  tf::testing::RunTempDir tmp_;
  fs::path text_, dir_ = tmp_.path() / "run";
};

TEST_P(HeadsCommand, JsonAndTableRankEveryHeadAndAgreeWithEval) {
  const int64_t layers = 2, heads = 2;  // tiny_gpt.yaml, tiny_bert.yaml
  const auto json = run({"heads", dir_.string(), "--text", text_.string(), "--batches", "3", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto eval = run({"eval", dir_.string(), "--text", text_.string(), "--batches", "3", "--json"});
  ASSERT_EQ(eval.code, 0) << eval.err;
  // Every head masked in turn and none masked read the same batches as eval: the unmasked loss is eval's.
  EXPECT_EQ(json_value(json.out, "loss"), json_value(eval.out, "loss"));
  EXPECT_EQ(json_value(json.out, "tokens"), json_value(eval.out, "tokens"));
  EXPECT_EQ(json_value(json.out, "batches"), 3);
  const double loss = json_value(json.out, "loss");

  const std::vector<HeadRow> rows = heads_of(json.out);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), layers * heads) << json.out;
  std::set<std::pair<int64_t, int64_t>> seen;
  std::map<int64_t, double> squares;
  for (size_t i = 0; i < rows.size(); ++i) {
    const HeadRow& r = rows[i];
    seen.insert({r.layer, r.head});
    squares[r.layer] += r.importance * r.importance;
    EXPECT_GT(r.raw, 0);
    EXPECT_TRUE(std::isfinite(r.masked));
    EXPECT_NEAR(r.delta, r.masked - loss, 1e-12);
    if (i > 0) {
      EXPECT_GE(rows[i - 1].importance, r.importance);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), layers * heads);
  for (const auto& [layer, sum] : squares) EXPECT_NEAR(sum, 1.0, 1e-9) << "layer " << layer;

  // The table: one line per head, in the JSON's order, with the same figures to the digits shown.
  const auto table = run({"heads", dir_.string(), "--text", text_.string(), "--batches", "3"});
  ASSERT_EQ(table.code, 0) << table.err;
  expect_has(table.out, "rank  layer  head  importance  raw importance  loss masked     delta");
  const std::regex line(R"(\n +(\d+) +(\d+) +(\d+) +([0-9.]+) +\S+ +([0-9.]+) +([-+][0-9.]+))");
  size_t i = 0;
  for (auto it = std::sregex_iterator(table.out.begin(), table.out.end(), line); it != std::sregex_iterator(); ++it, ++i) {
    ASSERT_LT(i, rows.size());
    EXPECT_EQ(std::stoll((*it)[1]), static_cast<long long>(i + 1));
    EXPECT_EQ(std::stoll((*it)[2]), rows[i].layer);
    EXPECT_EQ(std::stoll((*it)[3]), rows[i].head);
    EXPECT_NEAR(std::stod((*it)[4]), rows[i].importance, 5e-5);
    EXPECT_NEAR(std::stod((*it)[5]), rows[i].masked, 5e-5);
  }
  EXPECT_EQ(i, rows.size()) << table.out;
}

INSTANTIATE_TEST_SUITE_P(Models, HeadsCommand, ::testing::Values("tiny_gpt", "tiny_bert"),
                         [](const auto& info) { return std::string(info.param); });

TEST(HeadsCommandErrors, BadInputExitsWithTwo) {
  tf::testing::RunTempDir tmp;
  auto o = tf::testing::run_command({"heads", (tmp.path() / "missing.h5").string()}, tmp.path());
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: cannot open HDF5 file '" + (tmp.path() / "missing.h5").string() + "': no such file");
  o = tf::testing::run_command({"heads", "x.h5", "--batches", "-1"}, tmp.path());
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--batches: must be an integer in [0, 1099511627776], got -1");
  o = tf::testing::run_command({"heads", "--help"}, tmp.path());
  EXPECT_EQ(o.code, 0);
  expect_has(o.out, "Michel et al. 2019");

  // A text of one token has nothing to predict.
  const fs::path text = tmp.path() / "text.txt", dir = tmp.path() / "run";
  tf::testing::write_file(text, tf::testing::english_text(8000));
  ASSERT_EQ(tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, dir, tmp.path() / "cache",
                                                             {"train.steps=2", "schedule.warmup_steps=0", "eval.interval=0"}),
                                     tmp.path())
                .code,
            0);
  tf::testing::write_file(tmp.path() / "short.txt", "a");
  o = tf::testing::run_command({"heads", dir.string(), "--text", (tmp.path() / "short.txt").string()}, tmp.path());
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: the text is too short to measure head importance on (1 tokens)");
}

// A differential layer pairs its softmax heads into one and a Mamba layer has none; there is no head
// to gate, so heads and prune refuse the checkpoint by name, and prune writes nothing.
TEST(HeadsCommandErrors, RefusesADifferentialOrMambaModel) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp.path() / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(8000));
  struct Model {
    const char *name, *mixer, *message;
  };
  for (const Model& m : {Model{"differential", "model.mixer=[attention, differential]",
                               " has differential attention in layer 1 (model.mixer)"},
                         Model{"mamba", "model.mixer=[attention, mamba]", " has a Mamba layer, 1 (model.mixer)"}}) {
    const std::string mixer = m.mixer, message = m.message;
    const fs::path dir = tmp.path() / m.name;
    ASSERT_EQ(tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, dir, tmp.path() / "cache",
                                                               {"train.steps=2", "schedule.warmup_steps=0",
                                                                "eval.interval=0", mixer}),
                                       tmp.path())
                  .code,
              0);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"heads", dir.string()},
          std::vector<std::string>{"prune", dir.string(), "--heads", "0.5", "--out", (tmp.path() / "p.h5").string()}}) {
      const auto o = tf::testing::run_command(args, tmp.path());
      EXPECT_EQ(o.code, 2) << args[0];
      expect_has(o.err, "error: " + args[0] + ": " + (dir / "ckpt_00000002.h5").string() + message);
    }
    EXPECT_FALSE(fs::exists(tmp.path() / "p.h5"));
  }
}

}  // namespace
}  // namespace tf::inspect

// `tapeformer inspect` end to end on tiny trained checkpoints: the files it promises, attention.h5
// equal (bit for bit) to the maps captured in this process from the same checkpoint, rows that sum
// to 1, a table line per head, and bad input refused with exit 2.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "framework/io/hdf5_io.h"
#include "inspect/attention_maps.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"
#include "train/run_fixture.h"

namespace tf::inspect {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

class InspectCommand : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    tf::testing::write_file(tmp_.path() / "text.txt", tf::testing::english_text(6000));
    const auto o = run(tf::testing::train_args(GetParam(), tmp_.path() / "text.txt", run_dir_, tmp_.path() / "cache",
                                               {"train.steps=2", "schedule.warmup_steps=0", "eval.interval=0"}));
    ASSERT_EQ(o.code, 0) << o.err;
  }
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  tf::testing::RunTempDir tmp_;
  fs::path run_dir_ = tmp_.path() / "run";
};

TEST_P(InspectCommand, WritesPicturesMapsAndStatisticsOfEveryHead) {
  const fs::path out = tmp_.path() / "inspect";
  const std::string text = "The river was small.";  // within the tiny models' 32 positions
  const auto o = run({"inspect", run_dir_.string(), "--text", text, "--out", out.string()});
  ASSERT_EQ(o.code, 0) << o.err;

  // The same maps, captured here from the same checkpoint.
  const train::LoadedRun loaded = train::load_checkpoint(train::checkpoint_argument(run_dir_.string()));
  bool truncated = true;
  const AttentionMaps maps = capture_attention(
      *loaded.run.model, *loaded.run.tokenizer,
      inspection_ids(*loaded.run.model, *loaded.run.tokenizer, text, loaded.run.recipe.model.max_seq_len, &truncated));
  EXPECT_FALSE(truncated);
  const H5Reader h5((out / "attention.h5").string());
  ASSERT_EQ(h5.list("attention").size(), maps.layers.size());
  for (size_t l = 0; l < maps.layers.size(); ++l) {
    const Tensor written = h5.read_tensor("attention", "layer" + std::to_string(l));
    ASSERT_EQ(written.shape(), maps.layers[l].shape());
    EXPECT_EQ(std::memcmp(written.raw_data(), maps.layers[l].raw_data(), written.nbytes()), 0) << "layer " << l;
  }
  const std::string json = read_file(out / "heads.json");
  const int64_t H = maps.layers[0].dim(0);
  for (size_t l = 0; l < maps.layers.size(); ++l)
    for (int64_t h = 0; h < H; ++h) {
      const std::string picture = "layer" + std::to_string(l) + "_head" + std::to_string(h) + ".png";
      EXPECT_TRUE(fs::exists(out / picture)) << picture;
      expect_has(json, "\"picture\": \"" + picture + "\"");
      // The table's line for this head.
      EXPECT_TRUE(std::regex_search(o.out, std::regex("\\n +" + std::to_string(l) + " +" + std::to_string(h) + " +[0-9]")))
          << o.out;
    }
  EXPECT_TRUE(fs::exists(out / "overview.png"));
  expect_has(json, "\"causal\": " + std::string(GetParam() == "tiny_gpt" ? "true" : "false"));
  expect_has(json, "\"tokens\": [");
}

TEST_P(InspectCommand, BadInputIsRefusedWithExitTwo) {
  auto o = run({"inspect", run_dir_.string(), "--out", (tmp_.path() / "x").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "inspect: give the text with --text TEXT or --file FILE");
  o = run({"inspect", run_dir_.string(), "--text", "abc", "--max-tokens", "100000", "--out", (tmp_.path() / "x").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--max-tokens 100000 exceeds the model's context, model.max_seq_len = ");
  tf::testing::write_file(tmp_.path() / "a_file", "x");
  o = run({"inspect", run_dir_.string(), "--text", "abc", "--out", (tmp_.path() / "a_file" / "sub").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--out '" + (tmp_.path() / "a_file" / "sub").string() + "': cannot create the folder");
  tf::testing::write_file(tmp_.path() / "empty.txt", "");
  o = run({"inspect", run_dir_.string(), "--file", (tmp_.path() / "empty.txt").string(), "--out", (tmp_.path() / "x").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "the text to inspect is empty");
}

// --out is checked before the checkpoint is loaded: an output folder that cannot be created is named
// even when the text would have been refused too, and nothing is written.
TEST_P(InspectCommand, AnOutputFolderThatCannotBeCreatedIsRefusedFirst) {
  tf::testing::write_file(tmp_.path() / "a_file", "x");
  tf::testing::write_file(tmp_.path() / "empty.txt", "");
  const fs::path out = tmp_.path() / "a_file" / "sub";
  auto o = run({"inspect", run_dir_.string(), "--file", (tmp_.path() / "empty.txt").string(), "--out", out.string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: inspect --out '" + out.string() + "': cannot create the folder: '" +
                        (tmp_.path() / "a_file").string() + "' is a file, not a folder");
  o = run({"inspect", (tmp_.path() / "no_run").string(), "--text", "abc", "--out", (tmp_.path() / "a_file").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: inspect --out '" + (tmp_.path() / "a_file").string() + "' is a file; expected a folder");
  EXPECT_EQ(read_file(tmp_.path() / "a_file"), "x");
}

INSTANTIATE_TEST_SUITE_P(Models, InspectCommand, ::testing::Values("tiny_gpt", "tiny_bert"));

}  // namespace
}  // namespace tf::inspect

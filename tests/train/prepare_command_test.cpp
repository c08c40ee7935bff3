// `tapeformer prepare`: the shards a later `train` maps without reading the text again; --llmc's
// llm.c token files hold the shards' ids; bad input exits 2 naming the key.
#include <gtest/gtest.h>

#include "data/token_file.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> prepare_args(const fs::path& text, const fs::path& cache, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"prepare", tf::testing::source_path("recipes/tiny_gpt.yaml"), "--set",
                                   "data.corpus=files", "--set", "data.train_path=" + text.string(), "--set",
                                   "data.cache_dir=" + cache.string()};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(PrepareCommand, TrainMapsWhatPrepareMadeAndLlmcFilesHoldTheSameIds) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp.path() / "text.txt", cache = tmp.path() / "cache", llmc = tmp.path() / "llmc";
  tf::testing::write_file(text, tf::testing::english_text(20000));
  const auto prepared = tf::testing::run_command(prepare_args(text, cache, {"--llmc", llmc.string()}), tmp.path());
  ASSERT_EQ(prepared.code, 0) << prepared.err;
  EXPECT_NE(prepared.out.find("encoding the training text"), std::string::npos) << prepared.out;
  EXPECT_NE(prepared.out.find("(prepared now)"), std::string::npos) << prepared.out;

  // The llm.c files hold the shards' ids.
  fs::path folder;
  for (const auto& entry : fs::directory_iterator(cache)) folder = entry.path();
  for (const char* split : {"train", "val"}) {
    const data::TokenFile shard = data::open_token_file(folder / (std::string(split) + ".tokens"));
    const data::TokenFile exported = data::open_token_file(llmc / (std::string(split) + ".bin"));
    EXPECT_EQ(exported.info.format, data::TokenFileFormat::llmc);
    EXPECT_GT(shard.tokens.size(), 100);
    EXPECT_EQ(exported.tokens.to_vector(), shard.tokens.to_vector()) << split;
  }

  const auto again = tf::testing::run_command(prepare_args(text, cache), tmp.path());
  EXPECT_NE(again.out.find("(already prepared and current)"), std::string::npos) << again.out;
  const auto trained = tf::testing::run_command(
      tf::testing::train_args("tiny_gpt", text, tmp.path() / "run", cache, {"train.steps=3", "schedule.warmup_steps=1"}),
      tmp.path());
  ASSERT_EQ(trained.code, 0) << trained.err;
  EXPECT_EQ(trained.out.find("encoding"), std::string::npos) << "train prepared the corpus again:\n" << trained.out;

  const auto missing = tf::testing::run_command(prepare_args(tmp.path() / "nowhere.txt", cache), tmp.path());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("data.train_path: '"), std::string::npos) << missing.err;
}

TEST(PrepareCommand, AFullDiskLeavesNoShardThatLooksComplete) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp.path() / "text.txt", cache = tmp.path() / "cache";
  tf::testing::write_file(text, tf::testing::english_text(300000));  // a training shard of ~540 KB
  const int code = tf::testing::run_tapeformer(prepare_args(text, cache), tmp.path() / "out.txt",
                                               tmp.path() / "err.txt", tmp.path(), 200000);
  const std::string err = tf::testing::read_file(tmp.path() / "err.txt");
  EXPECT_EQ(code, 2) << err;
  EXPECT_NE(err.find("cannot write"), std::string::npos) << err;
  EXPECT_NE(err.find("(is the disk full?)"), std::string::npos) << err;
  for (const auto& entry : fs::recursive_directory_iterator(cache)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(entry.is_directory() || name == "tokenizer.txt") << "left behind: " << entry.path();
  }
  // With room again, the corpus is prepared whole.
  const auto again = tf::testing::run_command(prepare_args(text, cache), tmp.path());
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("(prepared now)"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace tf::train

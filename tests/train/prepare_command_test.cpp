// `tapeformer prepare`: the shards a later `train` maps without reading the text again; --llmc's
// llm.c token files hold the shards' ids; bad input exits 2 naming the key.
#include <gtest/gtest.h>

#include <regex>

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

// llm.c's files train here: the ids `prepare --llmc` exported from a text train a GPT (data.corpus:
// tokens) to the same losses, bit for bit, as the text itself; the model then reads and writes ids.
TEST(PrepareCommand, TrainingOnExportedLlmcFilesGivesTheTextsLossesBitForBit) {
  tf::testing::RunTempDir tmp;
  const fs::path text = tmp.path() / "text.txt", cache = tmp.path() / "cache", llmc = tmp.path() / "llmc";
  tf::testing::write_file(text, tf::testing::english_text(30000));
  ASSERT_EQ(tf::testing::run_command(prepare_args(text, cache, {"--llmc", llmc.string()}), tmp.path()).code, 0);
  const std::vector<std::string> run = {"train.steps=8", "schedule.warmup_steps=2", "eval.interval=4",
                                        "train.threads=1"};
  const auto from_text = tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, tmp.path() / "text_run", cache, run),
                                                  tmp.path());
  ASSERT_EQ(from_text.code, 0) << from_text.err;
  std::vector<std::string> tokens = run;
  tokens.insert(tokens.end(), {"data.corpus=tokens", "data.train_path=" + (llmc / "train.bin").string(),
                               "data.val_path=" + (llmc / "val.bin").string()});
  const auto from_ids = tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, tmp.path() / "ids_run", cache, tokens),
                                                 tmp.path());
  ASSERT_EQ(from_ids.code, 0) << from_ids.err;
  EXPECT_NE(from_ids.out.find("llm.c token file '" + (llmc / "train.bin").string() + "'"), std::string::npos)
      << from_ids.out;
  const auto a = tf::testing::read_metrics(tmp.path() / "text_run/metrics.jsonl");
  const auto b = tf::testing::read_metrics(tmp.path() / "ids_run/metrics.jsonl");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at("train_loss"), b[i].at("train_loss")) << "step " << i + 1;
    EXPECT_EQ(a[i].at("val_loss"), b[i].at("val_loss")) << "step " << i + 1;
  }
  EXPECT_NE(a[3].at("val_loss"), "null");
  EXPECT_EQ(b[3].at("val_bits_per_char"), "null") << "ids stand for no known text";

  // The model reads ids and writes ids.
  const auto sampled = tf::testing::run_command({"sample", (tmp.path() / "ids_run").string(), "--prompt", "3 4",
                                                 "--tokens", "5", "--temperature", "0"}, tmp.path());
  ASSERT_EQ(sampled.code, 0) << sampled.err;
  EXPECT_TRUE(std::regex_search(sampled.out, std::regex(R"(^3 4( \d+){5}\s*$)"))) << sampled.out;
  const auto text_prompt = tf::testing::run_command({"sample", (tmp.path() / "ids_run").string(), "--prompt", "The"},
                                                    tmp.path());
  EXPECT_EQ(text_prompt.code, 2);
  EXPECT_NE(text_prompt.err.find("'The' at byte 0 is not a token id"), std::string::npos) << text_prompt.err;
  // A recipe whose sample prompt is text is refused before it trains.
  tokens.push_back("sample.tokens=20");
  const auto refused = tf::testing::run_command(tf::testing::train_args("tiny_gpt", text, tmp.path() / "r3", cache, tokens),
                                                tmp.path());
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("is text, and the model of a data.corpus: tokens run reads ids"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "r3"));
}

TEST(PrepareCommand, AListOfPathsIsOneCorpusAndTheDataRootHoldsTheShards) {
  tf::testing::RunTempDir tmp;
  const fs::path a = tmp.path() / "a.txt", b = tmp.path() / "more/b, with a comma.txt", root = tmp.path() / "root";
  fs::create_directories(b.parent_path());
  tf::testing::write_file(a, tf::testing::english_text(20000, 1));
  tf::testing::write_file(b, tf::testing::english_text(30000, 2));
  const std::vector<std::string> args = {"prepare", tf::testing::source_path("recipes/tiny_gpt.yaml"), "--set",
                                         "data.corpus=files", "--set",
                                         "data.train_path=[" + a.string() + ", \"" + b.string() + "\"]"};
  {
    // No data.cache_dir: the shards go to <data root>/shards, the root from TAPEFORMER_DATA.
    const tf::testing::EnvGuard env("TAPEFORMER_DATA", root.string());
    const auto prepared = tf::testing::run_command(args, tmp.path());
    ASSERT_EQ(prepared.code, 0) << prepared.err;
    EXPECT_NE(prepared.out.find("2 files"), std::string::npos) << prepared.out;
    EXPECT_NE(prepared.out.find("shards       " + (root / "shards").string() + "/"), std::string::npos) << prepared.out;
  }
  // The two files are the corpus: the char tokenizer gives one id per character (the text is ASCII)
  // of both, joined by a line break (the cut into training and validation text may take one).
  fs::path folder;
  for (const auto& entry : fs::directory_iterator(root / "shards")) folder = entry.path();
  const data::TokenFile train = data::open_token_file(folder / "train.tokens");
  const data::TokenFile val = data::open_token_file(folder / "val.tokens");
  const int64_t both = static_cast<int64_t>(fs::file_size(a) + fs::file_size(b));
  EXPECT_GE(train.tokens.size() + val.tokens.size(), both);
  EXPECT_LE(train.tokens.size() + val.tokens.size(), both + 1);
  EXPECT_GT(val.tokens.size(), both / 20);

  // data.root in the recipe wins over the environment.
  std::vector<std::string> with_root = args;
  with_root.insert(with_root.end(), {"--set", "data.root=" + (tmp.path() / "other").string()});
  const tf::testing::EnvGuard env("TAPEFORMER_DATA", root.string());
  const auto other = tf::testing::run_command(with_root, tmp.path());
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_TRUE(fs::is_directory(tmp.path() / "other/shards")) << other.out;
}

TEST(PrepareCommand, TheLinuxCorpusMissingFromTheDataRootSaysHowToInstallIt) {
  tf::testing::RunTempDir tmp;
  const auto missing = tf::testing::run_command(
      {"prepare", tf::testing::source_path("recipes/gpt_linux_c.yaml"), "--set", "data.root=" + tmp.path().string()},
      tmp.path());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("data.corpus linux: no Linux sources at '" + (tmp.path() / "linux").string() + "'"),
            std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("scripts/setup.sh --corpus linux"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "shards"));
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

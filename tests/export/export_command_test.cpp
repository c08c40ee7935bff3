// `tapeformer export`: weights files (a checkpoint without optimizer state) that every reader of a
// model takes and a resume refuses; what GGUF cannot express, refused with each reason; and the
// output's safety rules (no overwrite unless asked, never the source).
#include <gtest/gtest.h>

#include "train/checkpoint.h"
#include "train/run_fixture.h"

namespace tf {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

class ExportCommand : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.path() / "corpus.txt") << testing::english_text(60000); }

  fs::path train(const std::string& name, const std::string& recipe, std::vector<std::string> more = {}) {
    const fs::path run = dir_.path() / name;
    more.insert(more.begin(), {"train.steps=6", "eval.interval=0"});
    const auto outcome =
        run_command(testing::train_args(recipe, dir_.path() / "corpus.txt", run, dir_.path() / "cache", more), dir_.path());
    EXPECT_EQ(outcome.code, 0) << outcome.err;
    return run;
  }
  testing::CommandOutcome tapeformer(const std::vector<std::string>& args) { return run_command(args, dir_.path()); }
  fs::path out(const std::string& name) const { return dir_.path() / name; }

  testing::TempDir dir_;
};

TEST_F(ExportCommand, AWeightsFileIsAThirdOfTheCheckpointAndSamplesEvaluatesAndFineTunesTheSame) {
  const fs::path run = train("gpt", "tiny_gpt");
  const fs::path ckpt = train::checkpoint_path(run, 6);
  const auto exported = tapeformer({"export", run.string(), "--format", "weights", "--out", out("w.h5").string()});
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_NE(exported.out.find("as weights"), std::string::npos) << exported.out;
  // AdamW keeps two moments per parameter: the weights are about a third of the checkpoint.
  EXPECT_LT(static_cast<double>(fs::file_size(out("w.h5"))), 0.45 * static_cast<double>(fs::file_size(ckpt)));
  EXPECT_TRUE(train::is_weights_file(out("w.h5")));
  EXPECT_FALSE(train::is_weights_file(ckpt));

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"sample", "--temperature", "0", "--tokens", "30"},
        std::vector<std::string>{"eval", "--json"}}) {
    std::vector<std::string> from_ckpt = command, from_weights = command;
    from_ckpt.insert(from_ckpt.begin() + 1, ckpt.string());
    from_weights.insert(from_weights.begin() + 1, out("w.h5").string());
    const auto a = tapeformer(from_ckpt), b = tapeformer(from_weights);
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    std::string b_out = b.out;  // eval names the file it read
    if (const size_t at = b_out.find(out("w.h5").string()); at != std::string::npos)
      b_out.replace(at, out("w.h5").string().size(), ckpt.string());
    EXPECT_EQ(a.out, b_out) << command[0];
  }
  const auto info = tapeformer({"info", out("w.h5").string()});
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("weights only"), std::string::npos) << info.out;

  std::vector<std::string> args = testing::train_args("tiny_gpt", dir_.path() / "corpus.txt", out("tuned"),
                                                      dir_.path() / "cache", {"train.steps=2", "schedule.warmup_steps=0", "eval.interval=0"});
  args.insert(args.end(), {"--init-from", out("w.h5").string()});
  const auto tuned = tapeformer(args);
  EXPECT_EQ(tuned.code, 0) << tuned.err;
}

TEST_F(ExportCommand, AResumeFromAWeightsFileIsRefusedWithTheWayToFineTune) {
  const fs::path run = train("gpt", "tiny_gpt");
  ASSERT_EQ(tapeformer({"export", run.string(), "--format", "weights", "--out", out("w.h5").string()}).code, 0);
  std::vector<std::string> args = testing::train_args("tiny_gpt", dir_.path() / "corpus.txt", run, dir_.path() / "cache",
                                                      {"train.steps=8", "eval.interval=0"});
  args.insert(args.end(), {"--resume", out("w.h5").string()});
  const auto resumed = tapeformer(args);
  EXPECT_EQ(resumed.code, 2);
  EXPECT_NE(resumed.err.find("a weights file (tapeformer export --format weights) holds no optimizer"), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("--init-from " + out("w.h5").string()), std::string::npos) << resumed.err;
}

TEST_F(ExportCommand, AnExistingOutputIsKeptUnlessOverwriteAndTheSourceIsNeverTheOutput) {
  const fs::path run = train("gpt", "tiny_gpt");
  std::ofstream(out("taken.gguf")) << "mine";
  const auto refused = tapeformer({"export", run.string(), "--format", "gguf", "--out", out("taken.gguf").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("exists; it is kept"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::read_file(out("taken.gguf")), "mine");
  const auto replaced =
      tapeformer({"export", run.string(), "--format", "gguf", "--out", out("taken.gguf").string(), "--overwrite"});
  EXPECT_EQ(replaced.code, 0) << replaced.err;
  EXPECT_EQ(testing::read_file(out("taken.gguf")).substr(0, 4), "GGUF");

  const fs::path ckpt = train::checkpoint_path(run, 6);
  const auto onto_source =
      tapeformer({"export", ckpt.string(), "--format", "weights", "--out", ckpt.string(), "--overwrite"});
  EXPECT_EQ(onto_source.code, 2);
  EXPECT_NE(onto_source.err.find("is the checkpoint being exported"), std::string::npos) << onto_source.err;
  EXPECT_FALSE(train::is_weights_file(ckpt));

  const auto no_folder =
      tapeformer({"export", run.string(), "--format", "gguf", "--out", out("missing/m.gguf").string()});
  EXPECT_EQ(no_folder.code, 2);
  EXPECT_NE(no_folder.err.find("export --out"), std::string::npos) << no_folder.err;
  const auto typed = tapeformer({"export", run.string(), "--format", "weights", "--type", "f16", "--out", out("w.h5").string()});
  EXPECT_EQ(typed.code, 2);
  EXPECT_NE(typed.err.find("a weights file keeps float32"), std::string::npos) << typed.err;
  EXPECT_FALSE(fs::exists(out("w.h5")));
  for (const auto& entry : fs::directory_iterator(dir_.path()))
    EXPECT_EQ(entry.path().string().find(".partial"), std::string::npos) << entry.path();
}

TEST_F(ExportCommand, WhatNoLlamaCppArchitectureExpressesIsListedForEach) {
  const fs::path bert = train("bert", "tiny_bert");
  const auto refused = tapeformer({"export", bert.string(), "--format", "gguf", "--out", out("b.gguf").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("no llama.cpp architecture expresses this model"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("model.arch is bert"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(out("b.gguf")));

  const fs::path windowed = train("windowed", "tiny_gpt", {"model.attention_window=8", "model.position=rope"});
  const auto as_gguf = tapeformer({"export", windowed.string(), "--format", "gguf", "--out", out("w.gguf").string()});
  EXPECT_EQ(as_gguf.code, 2);
  for (const std::string reason : {"as llama:", "model.attention_window is set", "model.norm is layer; llama needs rms",
                                   "as gpt2:", "model.position is rope; gpt2 needs learned"})
    EXPECT_NE(as_gguf.err.find(reason), std::string::npos) << reason << "\n" << as_gguf.err;
}

// Note [gguf round trip]: from an f32 GGUF file, fine-tuning starts from the checkpoint's weights bit
// for bit: every step's loss equals the run started from the checkpoint itself.
TEST_F(ExportCommand, AnF32GgufFileStartsTheSameFineTuneAsItsCheckpoint) {
  for (const auto& [name, block] : {std::pair<std::string, std::vector<std::string>>{"classic", {}},
                                    {"modern", {"model.position=rope", "model.norm=rms", "model.feed_forward=swiglu",
                                                "model.bias=false", "model.tie_embeddings=false"}}}) {
    const fs::path run = train(name, "tiny_gpt", block);
    const fs::path gguf = out(name + ".gguf");
    ASSERT_EQ(tapeformer({"export", run.string(), "--format", "gguf", "--out", gguf.string()}).code, 0);
    std::vector<std::vector<testing::MetricsRecord>> records;
    for (const fs::path& from : {run, gguf}) {
      const fs::path tuned = out(name + "-from-" + from.filename().string());
      std::vector<std::string> args = testing::train_args("tiny_gpt", dir_.path() / "corpus.txt", tuned, dir_.path() / "cache",
                                                          {"train.steps=4", "schedule.warmup_steps=0", "eval.interval=0"});
      args.insert(args.end(), {"--init-from", from.string()});
      const auto outcome = tapeformer(args);
      ASSERT_EQ(outcome.code, 0) << outcome.err;
      records.push_back(testing::read_metrics(tuned / "metrics.jsonl"));
    }
    ASSERT_EQ(records[0].size(), records[1].size()) << name;
    ASSERT_FALSE(records[0].empty());
    for (size_t i = 0; i < records[0].size(); ++i)
      EXPECT_EQ(records[0][i].at("train_loss"), records[1][i].at("train_loss")) << name << ", record " << i;
  }
}

TEST_F(ExportCommand, AGgufFileWithoutTapeformersRecipeIsRefusedAsAStart) {
  const fs::path run = train("gpt", "tiny_gpt");
  const fs::path gguf = out("m.gguf");
  ASSERT_EQ(tapeformer({"export", run.string(), "--format", "gguf", "--out", gguf.string()}).code, 0);
  std::string bytes = testing::read_file(gguf);
  const size_t at = bytes.find("tapeformer.recipe");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'T';  // the key is now "Tapeformer.recipe": a file some other tool wrote
  std::ofstream(out("foreign.gguf"), std::ios::binary) << bytes;
  std::vector<std::string> args = testing::train_args("tiny_gpt", dir_.path() / "corpus.txt", out("tuned"), dir_.path() / "cache",
                                                      {"train.steps=2", "schedule.warmup_steps=0"});
  args.insert(args.end(), {"--init-from", out("foreign.gguf").string()});
  const auto refused = tapeformer(args);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("a GGUF file without tapeformer.recipe"), std::string::npos) << refused.err;
  for (const auto& [bytes_kept, reason] : {std::pair<size_t, std::string>{100, "truncated GGUF file"},
                                            {bytes.size() / 2, "lies outside the file"}}) {
    std::ofstream(out("cut.gguf"), std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes_kept);
    args.back() = out("cut.gguf").string();
    const auto truncated = tapeformer(args);
    EXPECT_EQ(truncated.code, 2);
    EXPECT_NE(truncated.err.find(reason), std::string::npos) << truncated.err;
  }
}

TEST_F(ExportCommand, Q8ZeroWritesRowsThatAreNotWholeBlocksAsF16AndSaysWhich) {
  const fs::path run = train("gpt", "tiny_gpt", {"model.d_ff=40"});
  const auto exported =
      tapeformer({"export", run.string(), "--format", "gguf", "--type", "q8_0", "--out", out("q.gguf").string()});
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_NE(exported.err.find("2 matrices are written as f16, not q8_0"), std::string::npos) << exported.err;
  EXPECT_NE(exported.err.find("blk.0.ffn_down.weight (rows of 40)"), std::string::npos) << exported.err;
  EXPECT_NE(exported.err.find("blk.1.ffn_down.weight (rows of 40)"), std::string::npos) << exported.err;
}

}  // namespace
}  // namespace tf

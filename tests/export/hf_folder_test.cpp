// `tapeformer export --format safetensors`: a Hugging Face folder that an independent numpy reading
// (tests/export/hf_numpy.py, by transformers' names and conventions alone) runs to tapeformer's
// log-probabilities at every position: the names, shapes, config keys, Llama's rotate_half permutation
// of the query and key rows, GPT-2's transposed Conv1D weights, BERT's post-norm layers and RoFormer's
// rotation all have to be right for that.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "export/next_logprobs.h"
#include "train/checkpoint.h"
#include "train/run_fixture.h"
#include "train/run_folder.h"

namespace tf {
namespace {

namespace fs = std::filesystem;

const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-numpy (scripts/setup.sh --test)
const std::string kReader = std::string(TAPEFORMER_SOURCE_DIR) + "/tests/export/hf_numpy.py";

class HfFolder : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.path() / "corpus.txt") << testing::english_text(100000); }

  fs::path train(const std::string& name, std::vector<std::string> block, const std::string& recipe = "tiny_gpt") {
    const fs::path run = dir_.path() / name;
    block.insert(block.begin(), {"train.steps=40", "eval.interval=0", "model.max_seq_len=64"});
    const auto outcome =
        testing::run_command(testing::train_args(recipe, dir_.path() / "corpus.txt", run, dir_.path() / "cache", block),
                             dir_.path());
    EXPECT_EQ(outcome.code, 0) << outcome.err;
    return run;
  }

  // One row of log-probabilities per position.
  std::vector<std::vector<double>> numpy_logprobs(const fs::path& folder, const std::vector<int32_t>& ids) {
    std::vector<std::string> args = {kReader, folder.string()};
    for (const int32_t id : ids) args.push_back(std::to_string(id));
    testing::Child child(args, dir_.path() / "numpy.out", dir_.path() / "numpy.err", {}, kPython);
    const int status = child.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::read_file(dir_.path() / "numpy.err");
    std::istringstream in(testing::read_file(dir_.path() / "numpy.out"));
    std::vector<std::vector<double>> out;
    for (std::string line; std::getline(in, line);) {
      std::istringstream row(line);
      out.emplace_back();
      for (double x; row >> x;) out.back().push_back(x);
    }
    return out;
  }

  // Exports `run` as f32 and f16 folders and compares both readings with tapeformer's own.
  void expect_same_logprobs(const fs::path& run, const std::string& architecture) {
    const train::LoadedRun loaded = train::load_checkpoint(train::checkpoint_argument(run.string()));
    const layers::LanguageModel& model = *loaded.run.model;
    for (const auto& [type, tolerance] : {std::pair{"f32", 1e-5}, std::pair{"f16", 2e-3}}) {
      const fs::path folder = dir_.path() / (run.filename().string() + "-" + type);
      const auto exported = testing::run_command(
          {"export", run.string(), "--format", "safetensors", "--type", type, "--out", folder.string()}, dir_.path());
      ASSERT_EQ(exported.code, 0) << exported.err;
      EXPECT_NE(exported.out.find("(" + architecture + ", " + type + ")"), std::string::npos) << exported.out;
      EXPECT_NE(testing::read_file(folder / "config.json").find("\"architectures\": [\"" + architecture + "\"]"),
                std::string::npos);
      EXPECT_EQ(testing::read_file(folder / "tokenizer.txt"), loaded.run.tokenizer->to_string());
      for (const std::string prompt : {"The river was", "Water, people and the old house"}) {
        const std::vector<int32_t> ids = loaded.run.tokenizer->encode(prompt);
        const auto ours = testing::all_logprobs(model, ids), theirs = numpy_logprobs(folder, ids);
        ASSERT_EQ(theirs.size(), ours.size()) << type;
        double worst = 0;
        for (size_t t = 0; t < ours.size(); ++t) {
          ASSERT_EQ(theirs[t].size(), ours[t].size()) << type;
          for (size_t v = 0; v < ours[t].size(); ++v) worst = std::max(worst, std::fabs(theirs[t][v] - ours[t][v]));
        }
        EXPECT_LT(worst, tolerance) << type << ", prompt '" << prompt << "'";
        std::printf("%s %s, '%s': largest log-probability difference %.2e\n", architecture.c_str(), type, prompt.c_str(),
                    worst);
      }
    }
  }

  testing::TempDir dir_;
};

TEST_F(HfFolder, TheModernBlockLoadsAsLlamaForCausalLMByItsNames) {
  expect_same_logprobs(train("modern", {"model.position=rope", "model.norm=rms", "model.feed_forward=swiglu",
                                        "model.bias=false", "model.n_heads=4", "model.n_kv_heads=2",
                                        "model.tie_embeddings=false"}),
                       "LlamaForCausalLM");
}

TEST_F(HfFolder, TheClassicBlockLoadsAsGpt2LMHeadModelByItsNames) {
  expect_same_logprobs(train("classic", {}), "GPT2LMHeadModel");
}

// A BERT with the learned position table: BertForMaskedLM (post-norm, erf GELU, tied decoder).
TEST_F(HfFolder, ABertWithLearnedPositionsLoadsAsBertForMaskedLM) {
  expect_same_logprobs(train("bert", {"model.position=learned"}, "tiny_bert"), "BertForMaskedLM");
}

// The shipped BERT recipes take RoPE: RoFormerForMaskedLM, whose rotation is tapeformer's.
TEST_F(HfFolder, ABertWithRopeLoadsAsRoFormerForMaskedLM) {
  expect_same_logprobs(train("roformer", {"model.position=rope"}, "tiny_bert"), "RoFormerForMaskedLM");
}

TEST_F(HfFolder, AFolderThatHoldsAModelIsKeptUnlessOverwriteAndQ8ZeroIsRefused) {
  const fs::path run = train("classic", {});
  const fs::path folder = dir_.path() / "hf";
  ASSERT_EQ(testing::run_command({"export", run.string(), "--format", "safetensors", "--out", folder.string()}, dir_.path()).code, 0);
  const std::string before = testing::read_file(folder / "model.safetensors");
  const auto again = testing::run_command({"export", run.string(), "--format", "safetensors", "--type", "f16", "--out",
                                           folder.string()},
                                          dir_.path());
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("already holds a model.safetensors; it is kept"), std::string::npos) << again.err;
  EXPECT_EQ(testing::read_file(folder / "model.safetensors"), before);
  const auto q8 = testing::run_command({"export", run.string(), "--format", "safetensors", "--type", "q8_0", "--out",
                                        (dir_.path() / "q8").string()},
                                       dir_.path());
  EXPECT_EQ(q8.code, 2);
  EXPECT_NE(q8.err.find("safetensors holds f32 or f16 here"), std::string::npos) << q8.err;
}

TEST_F(HfFolder, WhatNoHuggingFaceClassExpressesIsNamed) {
  const auto refused = [&](const fs::path& run, const std::string& reason) {
    const auto outcome = testing::run_command(
        {"export", run.string(), "--format", "safetensors", "--out", (dir_.path() / "refused").string()}, dir_.path());
    EXPECT_EQ(outcome.code, 2);
    EXPECT_NE(outcome.err.find(reason), std::string::npos) << outcome.err;
    EXPECT_FALSE(fs::exists(dir_.path() / "refused" / "model.safetensors"));
  };
  const fs::path bert_rms = train("bert_rms", {"model.norm=rms"}, "tiny_bert");
  refused(bert_rms, "no Hugging Face masked-LM class (BertForMaskedLM, RoFormerForMaskedLM) expresses this BERT");
  refused(bert_rms, "model.norm is rms; a Hugging Face BERT needs layer");
  refused(train("gqa", {"model.n_kv_heads=1"}), "GPT2LMHeadModel has one key/value head per query head");
  refused(train("windowed", {"model.attention_window=8"}),
          "no Hugging Face model class (LlamaForCausalLM, GPT2LMHeadModel) expresses this model");
}

}  // namespace
}  // namespace tf

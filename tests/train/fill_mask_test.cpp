// `tapeformer fill` on tiny trained BERTs (character and BPE): every printed probability is the softmax
// of the model's own logits at the mask's position, computed here through the model API; the candidates
// are the k most probable, sorted; several masks sit at their own positions; bad input exits 2 with a
// message; nothing is written to the run folder.
#include "train/fill_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "data/batcher.h"
#include "data/char_tokenizer.h"
#include "framework/autograd/tape.h"
#include "inspect/attention_maps.h"
#include "train/checkpoint.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;

void expect_has(const std::string& text, const std::string& fragment) {
  EXPECT_NE(text.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << text;
}

struct Candidate {
  double score;
  int32_t token;
  std::string token_str, sequence;
};
struct Mask {
  int64_t position;
  std::vector<Candidate> candidates;
};

// The JSON string escapes the command writes (json_string): \" \\ and \u00XX.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
    } else if (s[++i] == 'u') {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 4), nullptr, 16));
      i += 4;
    } else {
      out += s[i];
    }
  }
  return out;
}

// fill --json's masks, in order, each with its candidates.
std::vector<Mask> masks_of(const std::string& json) {
  const std::string str = R"re("((?:[^"\\]|\\.)*)")re";
  const std::regex item(R"(\{"position": (\d+), "candidates": \[|\{"score": ([^,]+), "token": (\d+), "token_str": )" + str +
                        R"(, "sequence": )" + str + R"(\})");
  std::vector<Mask> out;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), item); it != std::sregex_iterator(); ++it) {
    if ((*it)[1].matched) {
      out.push_back({std::stoll((*it)[1]), {}});
    } else if (!out.empty()) {
      out.back().candidates.push_back(
          {std::stod((*it)[2]), static_cast<int32_t>(std::stol((*it)[3])), unescape((*it)[4]), unescape((*it)[5])});
    }
  }
  return out;
}

// A tiny BERT (or GPT) trained for a few steps by the program, in a folder of its own.
class FillCommand : public ::testing::Test {
 protected:
  void SetUp() override { tf::testing::write_file(text_, tf::testing::english_text(8000)); }
  fs::path train(const std::string& name, const std::string& recipe, std::vector<std::string> sets = {}) {
    sets.insert(sets.end(), {"train.steps=4", "schedule.warmup_steps=1", "eval.interval=0"});
    const fs::path dir = tmp_.path() / name;
    const auto o = run(tf::testing::train_args(recipe, text_, dir, tmp_.path() / "cache", sets));
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  }
  tf::testing::CommandOutcome run(const std::vector<std::string>& args) const {
    return tf::testing::run_command(args, tmp_.path());
  }
  tf::testing::RunTempDir tmp_;
  fs::path text_ = tmp_.path() / "text.txt";
};

// The independent truth: [CLS], each piece's tokens with [MASK] between, [SEP] through the model's
// logits; for each mask, its position among the text's tokens and softmax over the vocabulary.
struct Truth {
  std::vector<int64_t> positions;
  std::vector<std::vector<double>> probs;  // (masks, V)
  int32_t vocab = 0;
};
Truth truth_of(const fs::path& run_dir, const std::vector<std::string>& pieces) {
  const LoadedRun loaded = load_checkpoint(*latest_checkpoint(run_dir));
  const data::Tokenizer& tok = *loaded.run.tokenizer;
  const data::MaskedLmTokens special = data::MaskedLmTokens::from(tok);
  std::vector<int32_t> ids = {special.cls};
  Truth t;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) {
      t.positions.push_back(static_cast<int64_t>(ids.size()) - 1);
      ids.push_back(special.mask);
    }
    for (const int32_t id : tok.encode(pieces[i])) ids.push_back(id);
  }
  ids.push_back(special.sep);
  const NoGradGuard no_grad;
  const auto T = static_cast<int64_t>(ids.size());
  const Tensor logits = loaded.run.model->logits(Tensor::from_ids(ids, {1, T}), Tensor(), layers::Context{});
  const int64_t V = logits.dim(2);
  t.vocab = static_cast<int32_t>(V);
  for (const int64_t p : t.positions) {
    std::vector<double> row(static_cast<size_t>(V));
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) max = std::max(max, row[v] = logits.at((p + 1) * V + v));
    for (double& z : row) sum += z = std::exp(z - max);
    for (double& z : row) z /= sum;
    t.probs.push_back(row);
  }
  return t;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string out = pieces[0];
  for (size_t i = 1; i < pieces.size(); ++i) out += "[MASK]" + pieces[i];
  return out;
}

// Each mask's candidates are the k most probable tokens of the truth, in order, with its probabilities.
void expect_matches_truth(const std::vector<Mask>& masks, const Truth& truth, int64_t k,
                          const std::vector<std::string>& pieces, const data::Tokenizer& tok) {
  ASSERT_EQ(masks.size(), truth.positions.size());
  for (size_t m = 0; m < masks.size(); ++m) {
    EXPECT_EQ(masks[m].position, truth.positions[m]) << "mask " << m;
    ASSERT_EQ(static_cast<int64_t>(masks[m].candidates.size()), std::min<int64_t>(k, truth.vocab));
    std::vector<double> sorted = truth.probs[m];
    std::sort(sorted.rbegin(), sorted.rend());
    double sum = 0;
    for (size_t c = 0; c < masks[m].candidates.size(); ++c) {
      const Candidate& got = masks[m].candidates[c];
      EXPECT_NEAR(got.score, truth.probs[m][static_cast<size_t>(got.token)], 1e-5) << "mask " << m << " rank " << c;
      EXPECT_NEAR(got.score, sorted[c], 1e-5) << "rank " << c << " is not the " << c + 1 << "th most probable";
      if (c > 0) {
        EXPECT_LE(got.score, masks[m].candidates[c - 1].score);
      }
      sum += got.score;
      const std::string token = tok.decode(std::span<const int32_t>(&got.token, 1));
      // JSON holds text: a byte that is no UTF-8 character (part of one, in a BPE token) is written \xNN.
      EXPECT_EQ(got.token_str, inspect::utf8_or_escaped(token));
      std::vector<std::string> filled = pieces;  // the other masks stay "[MASK]"
      filled[m] += token + filled[m + 1];
      filled.erase(filled.begin() + static_cast<ptrdiff_t>(m) + 1);
      EXPECT_EQ(got.sequence, inspect::utf8_or_escaped(joined(filled)));
    }
    EXPECT_LE(sum, 1 + 1e-9);
  }
}

TEST_F(FillCommand, CharacterMasksGetTheSoftmaxOfTheModelsLogitsAtTheirPositions) {
  const fs::path dir = train("bert", "tiny_bert");
  const std::vector<std::string> pieces = {"the c", "t s", "t on the ", "at."};
  const auto o = run({"fill", dir.string(), "--text", joined(pieces), "--top-k", "4", "--json", "--threads", "1"});
  ASSERT_EQ(o.code, 0) << o.err;
  const Truth truth = truth_of(dir, pieces);
  EXPECT_EQ(truth.positions, (std::vector<int64_t>{5, 9, 19}));  // one character per mask
  const LoadedRun loaded = load_checkpoint(*latest_checkpoint(dir));
  expect_matches_truth(masks_of(o.out), truth, 4, pieces, *loaded.run.tokenizer);
  expect_has(o.out, "\"tokens\": 23, ");

  // The table shows the same candidates at 4 decimals, spaces as U+2423, and counts the masks.
  const auto table = run({"fill", dir.string(), "--text", joined(pieces), "--top-k", "4", "--threads", "1"});
  ASSERT_EQ(table.code, 0) << table.err;
  expect_has(table.out, "(23 tokens; 3 [MASK]s, predicted in one pass: each with the others still masked)");
  expect_has(table.out, "[MASK] 2 of 3, at token 9\n  rank   score     id  token  sequence\n");
  const std::vector<Mask> masks = masks_of(o.out);
  for (size_t m = 0; m < masks.size(); ++m)
    for (size_t c = 0; c < masks[m].candidates.size(); ++c) {
      char score[16];
      std::snprintf(score, sizeof score, "%6.4f", masks[m].candidates[c].score);
      expect_has(table.out, "  " + std::to_string(c + 1) + "  " + score + "  ");
    }
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 2 + 3 * (3 + 4)) << table.out;

  // Another thread count changes only the rounding.
  const auto two = run({"fill", dir.string(), "--text", joined(pieces), "--top-k", "4", "--json", "--threads", "2"});
  ASSERT_EQ(two.code, 0) << two.err;
  const std::vector<Mask> again = masks_of(two.out);
  ASSERT_EQ(again.size(), masks.size());
  for (size_t m = 0; m < masks.size(); ++m)
    for (const Candidate& c : again[m].candidates)
      EXPECT_NEAR(c.score, truth.probs[m][static_cast<size_t>(c.token)], 1e-5);

  // --top-k beyond the vocabulary shows all of it: the whole distribution, summing to 1.
  const auto all = run({"fill", dir.string(), "--text", "a [MASK]", "--top-k", "100000", "--json"});
  ASSERT_EQ(all.code, 0) << all.err;
  const std::vector<Mask> every = masks_of(all.out);
  ASSERT_EQ(every.size(), 1u);
  EXPECT_EQ(static_cast<int32_t>(every[0].candidates.size()), loaded.run.tokenizer->vocab_size());
  double sum = 0;
  for (const Candidate& c : every[0].candidates) sum += c.score;
  EXPECT_NEAR(sum, 1, 1e-9);
}

TEST_F(FillCommand, OneBpeMaskIsOneToken) {
  const fs::path dir = train("bpe", "tiny_bert", {"data.tokenizer=bpe", "data.bpe_vocab_size=320"});
  const std::vector<std::string> pieces = {"The house was", " and the", " was old."};
  const auto o = run({"fill", dir.string(), "--text", joined(pieces), "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const Truth truth = truth_of(dir, pieces);
  const LoadedRun loaded = load_checkpoint(*latest_checkpoint(dir));
  const data::Tokenizer& tok = *loaded.run.tokenizer;
  ASSERT_EQ(tok.kind(), "bpe");
  EXPECT_EQ(truth.positions[1], truth.positions[0] + 1 + static_cast<int64_t>(tok.encode(pieces[1]).size()));
  expect_matches_truth(masks_of(o.out), truth, 5, pieces, tok);
}

// A character outside the vocabulary is read as <unk> and said, as `sample --prompt` does.
TEST_F(FillCommand, CharactersOutsideTheVocabularyAreReadAsUnknown) {
  const fs::path dir = train("bert", "tiny_bert");
  const std::vector<std::string> pieces = {"the \xe2\x82\xac", " sat"};  // the euro sign is not in the text
  const auto o = run({"fill", dir.string(), "--text", joined(pieces), "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  expect_has(o.err, "note: 1 characters of the text are outside the checkpoint's vocabulary and were read as <unk>");
  const LoadedRun loaded = load_checkpoint(*latest_checkpoint(dir));
  expect_matches_truth(masks_of(o.out), truth_of(dir, pieces), 5, pieces, *loaded.run.tokenizer);
}

// Files, sizes and modification times of a folder's tree.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  return out;
}

TEST_F(FillCommand, BadInputExitsWithTwoAndNothingIsWritten) {
  const fs::path bert = train("bert", "tiny_bert"), gpt = train("gpt", "tiny_gpt");
  const auto before = snapshot(bert);
  const auto expect_error = [&](const std::vector<std::string>& args, const std::string& message) {
    const auto o = run(args);
    EXPECT_EQ(o.code, 2) << o.err;
    expect_has(o.err, message);
    EXPECT_TRUE(o.out.empty()) << o.out;
  };
  expect_error({"fill", gpt.string(), "--text", "the c[MASK]t"},
               "error: fill needs a masked-LM (BERT) model; " + gpt.string() + " is a GPT model; use `tapeformer sample`");
  expect_error({"fill", bert.string(), "--text", "the cat"},
               "error: fill: the text holds no [MASK] to predict; write [MASK] where a token is missing");
  expect_error({"fill", bert.string(), "--text", std::string(40, 'a') + "[MASK]"},
               "error: fill: the text is 41 tokens, 43 with [CLS] and [SEP], more than the model's context of 32 "
               "(model.max_seq_len)");
  expect_error({"fill", bert.string(), "--text", "a[MASK]", "--top-k", "0"},
               "--top-k: must be an integer in [1, 1073741824], got 0");
  expect_error({"fill", bert.string(), "--text", "a[MASK]", "--threads", "-1"},
               "--threads: must be an integer in [0, 1024], got -1");
  expect_error({"fill", bert.string()}, "--text is required");
  const fs::path missing = tmp_.path() / "missing.h5";
  expect_error({"fill", missing.string(), "--text", "a[MASK]"},
               "error: cannot open HDF5 file '" + missing.string() + "': no such file");
  tf::testing::write_file(tmp_.path() / "junk.h5", "not a checkpoint");
  expect_error({"fill", (tmp_.path() / "junk.h5").string(), "--text", "a[MASK]"},
               "is not an HDF5 file (no HDF5 signature found)");
  // Filling reads the run folder and writes nothing there (no report, no cache, no lock).
  ASSERT_EQ(run({"fill", bert.string(), "--text", "the c[MASK]t"}).code, 0);
  EXPECT_EQ(snapshot(bert), before);
}

// The library's splitting: each marker one mask id, the text between as pieces (empty ones too).
TEST(FillMask, MarkersSplitTheTextIntoPiecesAroundOneMaskIdEach) {
  data::CharTokenizer tok = data::CharTokenizer::train("abc", {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  const data::MaskedLmTokens special = data::MaskedLmTokens::from(tok);
  const MaskedText t = read_masked_text(tok, "[MASK]a[MASK][MASK]cz");
  EXPECT_EQ(t.pieces, (std::vector<std::string>{"", "a", "", "cz"}));
  const int32_t a = tok.encode("a")[0], c = tok.encode("c")[0];
  EXPECT_EQ(t.ids, (std::vector<int32_t>{special.cls, special.mask, a, special.mask, special.mask, c, 0, special.sep}));
  EXPECT_EQ(t.masks, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(t.unknown, 1);  // 'z'
  EXPECT_EQ(filled_text(t, 1, "b"), "[MASK]ab[MASK]cz");
  EXPECT_THROW(read_masked_text(tok, "abc [mask]"), InputError);  // the marker is case-sensitive, as HF's is
}

}  // namespace
}  // namespace tf::train

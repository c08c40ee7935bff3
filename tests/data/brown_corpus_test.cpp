// On the real Brown corpus, when `scripts/setup.sh --corpus` has installed it (skipped otherwise):
// preparation sizes, BPE training time for a 4096 vocabulary, compression and exact round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "data/bpe_tokenizer.h"
#include "data/brown.h"
#include "data/root.h"
#include "data/char_tokenizer.h"
#include "data/prepare.h"
#include "data/text.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

const std::filesystem::path kRaw = data_root("") / "brown/raw";  // scripts/setup.sh --corpus

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(BrownCorpus, PrepareTrainBpeAndRoundTrip) {
  if (!std::filesystem::exists(kRaw / "cr09")) GTEST_SKIP() << "no Brown corpus: run scripts/setup.sh --corpus";
  tf::testing::TempDir dir;
  auto start = std::chrono::steady_clock::now();
  const BrownSplits splits = prepare_brown(kRaw, dir.path());
  const double prepare_s = seconds_since(start);
  EXPECT_EQ(splits.train_documents, 450);
  EXPECT_EQ(splits.val_documents, 50);
  const std::string train = read_text(splits.train), val = read_text(splits.val);
  // Brown holds about 1.16 million words; as plain text that is a little under 6 MB.
  EXPECT_GT(train.size() + val.size(), 5'000'000u);
  EXPECT_LT(train.size() + val.size(), 7'000'000u);
  EXPECT_EQ(train.find("/at "), std::string::npos);  // tags are gone (slashes stay only inside words: 1/2)
  EXPECT_EQ(train.find("/nn "), std::string::npos);
  EXPECT_EQ(train.find(" ,"), std::string::npos);
  EXPECT_EQ(train.find("``"), std::string::npos);
  EXPECT_EQ(train.find("?? "), std::string::npos);

  start = std::chrono::steady_clock::now();
  const BpeTokenizer bpe = BpeTokenizer::train(train, 4096, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  const double train_s = seconds_since(start);
  EXPECT_EQ(bpe.vocab_size(), 4096);
  EXPECT_LT(train_s, 60.0) << "BPE training must take well under a minute";

  start = std::chrono::steady_clock::now();
  const std::vector<int32_t> train_ids = bpe.encode(train);
  const double encode_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  TokenizerSpec given;
  given.given = &bpe;
  PrepareOptions options;
  options.cache_dir = dir / "cache";
  const CorpusSpec corpus{{splits.train.string()}, {splits.val.string()}};
  const PreparedCorpus miss = prepare_corpus(corpus, given, options);
  const double miss_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const PreparedCorpus hit = prepare_corpus(corpus, given, options);
  const double hit_s = seconds_since(start);
  EXPECT_FALSE(miss.reused);
  EXPECT_TRUE(hit.reused);
  EXPECT_EQ(hit.train.tokens.to_vector(), train_ids);
  EXPECT_LT(hit_s, miss_s);
  const std::vector<int32_t> val_ids = bpe.encode(val);
  EXPECT_EQ(bpe.decode(val_ids), val);
  const double val_bytes_per_token = static_cast<double>(val.size()) / val_ids.size();
  EXPECT_GT(val_bytes_per_token, 3.0);  // English with a 4k vocabulary: roughly a token per 4 bytes

  const CharTokenizer chars = CharTokenizer::train(train);
  const std::vector<int32_t> val_chars = chars.encode(val);
  const auto unknown = std::count(val_chars.begin(), val_chars.end(), CharTokenizer::kUnknown);
  if (unknown == 0) {
    EXPECT_EQ(chars.decode(val_chars), val);
  }

  std::cout << "[brown] prepare " << prepare_s << " s; train.txt " << train.size() << " bytes, val.txt "
            << val.size() << " bytes\n"
            << "[brown] BPE 4096: train " << train_s << " s (" << bpe.merges().size() << " merges); encode train "
            << encode_s << " s -> " << train_ids.size() << " tokens (" << static_cast<double>(train.size()) / train_ids.size()
            << " bytes/token); val " << val_ids.size() << " tokens (" << val_bytes_per_token << " bytes/token)\n"
            << "[brown] token cache: miss " << miss_s << " s, hit " << hit_s << " s\n"
            << "[brown] char vocabulary " << chars.vocab_size() << ", " << unknown << " <unk> in val\n";
}

}  // namespace
}  // namespace tf::data

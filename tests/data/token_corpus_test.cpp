// A corpus of token files (data.corpus: tokens): llm.c files written byte by byte here train as
// they are; the vocabulary covers the largest id; too small a vocabulary names the id and where it
// is; without a validation file its last 10% is held out.
#include "data/token_corpus.h"

#include <gtest/gtest.h>

#include "data/char_tokenizer.h"
#include "support/errors.h"
#include "support/ramp.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::ramp;
using tf::testing::TempDir;
namespace fs = std::filesystem;

// An llm.c token file as dev/data/data_common.py writes it: 256 int32 (magic, version 1, count),
// then the ids as little-endian uint16; built by hand, not by the writer under test elsewhere.
void write_llmc(const fs::path& path, const std::vector<int32_t>& ids) {
  std::string bytes(1024, '\0');
  const int32_t header[3] = {20240520, 1, static_cast<int32_t>(ids.size())};
  for (int slot = 0; slot < 3; ++slot)
    for (int b = 0; b < 4; ++b) bytes[slot * 4 + b] = static_cast<char>(static_cast<uint32_t>(header[slot]) >> (8 * b) & 0xFF);
  for (const int32_t id : ids) {
    bytes += static_cast<char>(id & 0xFF);
    bytes += static_cast<char>(id >> 8 & 0xFF);
  }
  tf::testing::write_file(path, bytes);
}

TEST(TokenCorpus, LlmcFilesTrainAsTheyAreWithAVocabularyAboveTheirLargestId) {
  TempDir dir;
  std::vector<int32_t> train = ramp(1000, 50000), val = ramp(63, 50000);
  train[617] = 50256;  // GPT-2's <|endoftext|>, the largest id
  write_llmc(dir / "train.bin", train);
  write_llmc(dir / "val.bin", val);
  TokenCorpusSpec spec;
  spec.train_path = (dir / "train.bin").string();
  spec.val_path = (dir / "val.bin").string();
  const PreparedCorpus c = open_token_corpus(spec);
  EXPECT_EQ(c.train.tokens.to_vector(), train);
  EXPECT_EQ(c.val.tokens.to_vector(), val);
  EXPECT_EQ(c.tokenizer->kind(), "ids");
  EXPECT_EQ(c.tokenizer->vocab_size(), 50257);
  EXPECT_EQ(c.train_count, 1000);
  EXPECT_EQ(c.val.info.characters, 0u) << "ids stand for no known text";
  EXPECT_NE(c.description.find("llm.c token file"), std::string::npos) << c.description;

  spec.vocab_size = 60000;  // a vocabulary larger than the ids in use, as a model's may be
  spec.specials = {"[PAD]", "[MASK]"};
  const PreparedCorpus wide = open_token_corpus(spec);
  EXPECT_EQ(wide.tokenizer->vocab_size(), 60002);
  EXPECT_EQ(wide.tokenizer->id_of("[MASK]"), 60001);
}

TEST(TokenCorpus, AnIdOutsideTheVocabularyIsNamedWithItsFileAndIndex) {
  TempDir dir;
  std::vector<int32_t> val = ramp(17, 100);
  val[9] = 400;
  write_llmc(dir / "train.bin", ramp(50, 100));
  write_llmc(dir / "val.bin", val);
  TokenCorpusSpec spec;
  spec.train_path = (dir / "train.bin").string();
  spec.val_path = (dir / "val.bin").string();
  spec.vocab_size = 256;
  std::string message = testing::error_message<InputError>([&] { open_token_corpus(spec); });
  EXPECT_NE(message.find("data.val_path '" + spec.val_path + "': id 400 at index 9 is outside the vocabulary of 256"),
            std::string::npos) << message;
  EXPECT_NE(message.find("set data.vocab_size to at least 401"), std::string::npos) << message;

  // A checkpoint's tokenizer (resume, fine-tune, eval) bounds the ids the same way.
  const CharTokenizer chars({U'a', U'b'});  // 3 ids with <unk>
  spec.given = &chars;
  spec.vocab_size = 0;
  message = testing::error_message<InputError>([&] { open_token_corpus(spec); });
  EXPECT_NE(message.find("is outside the vocabulary of 3 ids of the checkpoint's tokenizer"), std::string::npos) << message;

  write_llmc(dir / "empty.bin", {});
  spec = {};
  spec.train_path = (dir / "empty.bin").string();
  message = testing::error_message<InputError>([&] { open_token_corpus(spec); });
  EXPECT_NE(message.find("holds no ids"), std::string::npos) << message;
}

TEST(TokenCorpus, WithoutAValidationFileTheLastTenthIsHeldOut) {
  TempDir dir;
  for (const int64_t n : {1, 3, 17, 1001}) {
    const std::vector<int32_t> ids = ramp(n, 300);
    write_llmc(dir / "all.bin", ids);
    TokenCorpusSpec spec;
    spec.train_path = (dir / "all.bin").string();
    const PreparedCorpus c = open_token_corpus(spec);
    const int64_t held = n / 10;
    EXPECT_EQ(c.val.tokens.size(), held) << n;
    EXPECT_EQ(c.train.tokens.to_vector(), std::vector<int32_t>(ids.begin(), ids.end() - held)) << n;
    EXPECT_EQ(c.val.tokens.to_vector(), std::vector<int32_t>(ids.end() - held, ids.end())) << n;
  }
}

}  // namespace
}  // namespace tf::data

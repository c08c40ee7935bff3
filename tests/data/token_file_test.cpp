// Token files: the shard and llm.c layouts byte for byte against headers built here from their
// specifications, round trips at odd sizes, and refusals of truncated, foreign and unfinished files.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "support/errors.h"
#include "support/ramp.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::read_file;
using tf::testing::ramp;
using tf::testing::TempDir;
using tf::testing::write_file;
namespace fs = std::filesystem;

// Little-endian bytes of an integer, written out by hand rather than through the writer's code.
template <typename T>
std::string le(T v) {
  std::string s(sizeof v, '\0');
  for (size_t i = 0; i < sizeof v; ++i) s[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i) & 0xFF);
  return s;
}

TEST(TokenFile, LlmcLayoutIsByteForByteTheSpecification) {
  // llm.c's dev/data/data_common.py: 256 int32 (magic 20240520, version 1, count, zeros), then uint16 ids.
  TempDir dir;
  for (const int64_t n : {0, 1, 3, 17, 63}) {
    const std::vector<int32_t> ids = ramp(n, 50257);
    std::string expected = le<int32_t>(20240520) + le<int32_t>(1) + le<int32_t>(static_cast<int32_t>(n));
    expected.resize(1024, '\0');
    for (const int32_t id : ids) expected += le<uint16_t>(static_cast<uint16_t>(id));

    TokenFileInfo info;
    info.format = TokenFileFormat::llmc;
    TokenFileWriter w(dir / "ours.bin", info);
    w.append(ids);
    w.finish();
    EXPECT_TRUE(read_file(dir / "ours.bin") == expected) << "n = " << n;

    write_file(dir / "theirs.bin", expected);  // a file as llm.c writes it trains here
    const TokenFile f = open_token_file(dir / "theirs.bin");
    EXPECT_EQ(f.info.format, TokenFileFormat::llmc);
    EXPECT_EQ(f.tokens.to_vector(), ids) << "n = " << n;
    EXPECT_TRUE(f.document_starts.empty());
  }
}

TEST(TokenFile, ShardLayoutAndRoundTripAtBothWidths) {
  TempDir dir;
  for (const int width : {2, 4})
    for (const int64_t n : {1, 3, 17, 63, 1000}) {
      const int32_t vocab = width == 2 ? 65536 : 100003;
      const std::vector<int32_t> ids = ramp(n, vocab);
      TokenFileInfo info;
      info.width = width;
      info.tokenizer_fingerprint = 0x1122334455667788ull;
      info.source_fingerprint = 0x99aabbccddeeff00ull;
      info.characters = 12345;
      info.vocab_size = static_cast<uint64_t>(vocab);
      info.unknown = 77;
      const fs::path path = dir / std::to_string(width * 100000 + n);  // (a "+" of literals trips GCC 12's -Wrestrict)
      {
        TokenFileWriter w(path, info);
        w.start_document();
        w.append(std::span(ids).first(n / 2));
        w.start_document();
        w.append(std::span(ids).subspan(n / 2));
        w.finish();
      }
      // The layout of token_file.h, built here field by field.
      std::string expected = le<int32_t>(20261203) + le<int32_t>(1) + le<int32_t>(width) + le<int32_t>(0) +
                             le<uint64_t>(n) + le<uint64_t>(n / 2 == 0 ? 1 : 2) + le<uint64_t>(0x1122334455667788ull) +
                             le<uint64_t>(0x99aabbccddeeff00ull) + le<uint64_t>(12345) + le<uint64_t>(vocab) + le<uint64_t>(77);
      expected.resize(1024, '\0');
      for (const int32_t id : ids) expected += width == 2 ? le<uint16_t>(static_cast<uint16_t>(id)) : le<int32_t>(id);
      expected.resize((expected.size() + 7) / 8 * 8, '\0');
      expected += le<uint64_t>(0);
      if (n / 2 != 0) expected += le<uint64_t>(n / 2);
      EXPECT_TRUE(read_file(path) == expected) << "width " << width << ", n = " << n;

      const TokenFile f = open_token_file(path);
      EXPECT_EQ(f.info.width, width);
      EXPECT_EQ(f.info.characters, 12345u);
      EXPECT_EQ(f.info.unknown, 77u);
      EXPECT_EQ(f.info.vocab_size, static_cast<uint64_t>(vocab));
      EXPECT_EQ(f.tokens.to_vector(), ids);
      ASSERT_EQ(f.tokens.size(), n);
      EXPECT_EQ(f.tokens[n - 1], ids[n - 1]);
      std::vector<int32_t> window(n / 3 + 1);
      f.tokens.copy(n - static_cast<int64_t>(window.size()), static_cast<int64_t>(window.size()), window.data());
      EXPECT_TRUE(std::equal(window.begin(), window.end(), ids.end() - static_cast<int64_t>(window.size())));
      EXPECT_EQ(f.tokens.slice(1, n).to_vector(), std::vector<int32_t>(ids.begin() + 1, ids.end()));
      f.tokens.release_before(n);  // pages leave the resident set; the ids read the same after
      EXPECT_EQ(f.tokens.to_vector(), ids);
    }
}

TEST(TokenFile, TruncatedForeignAndUnfinishedFilesAreRefusedNamingTheFile) {
  TempDir dir;
  TokenFileInfo info;
  info.vocab_size = 300;
  {
    TokenFileWriter w(dir / "a.tokens", info);
    w.append(ramp(100, 300));
    w.finish();
  }
  const std::string whole = read_file(dir / "a.tokens");
  write_file(dir / "cut.tokens", whole.substr(0, whole.size() - 1));
  std::string message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "cut.tokens"); });
  EXPECT_NE(message.find("cut.tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;

  write_file(dir / "short.tokens", whole.substr(0, 100));
  message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "short.tokens"); });
  EXPECT_NE(message.find("shorter than the 1024-byte header"), std::string::npos) << message;

  write_file(dir / "text.tokens", std::string(2000, 'x'));
  message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "text.tokens"); });
  EXPECT_NE(message.find("not a token file"), std::string::npos) << message;

  std::string llmc_v2 = le<int32_t>(20240520) + le<int32_t>(2) + le<int32_t>(0);
  llmc_v2.resize(1024, '\0');
  write_file(dir / "v2.bin", llmc_v2);
  message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "v2.bin"); });
  EXPECT_NE(message.find("llm.c version 2"), std::string::npos) << message;

  // A forged count far beyond the file is refused, not overflowed into a small size.
  std::string forged = whole;
  const uint64_t huge = ~0ull / 2;
  std::memcpy(forged.data() + 16, &huge, sizeof huge);
  write_file(dir / "forged.tokens", forged);
  message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "forged.tokens"); });
  EXPECT_NE(message.find("more than its"), std::string::npos) << message;

  message = tf::testing::error_message<InputError>([&] { open_token_file(dir / "missing.tokens"); });
  EXPECT_NE(message.find("missing.tokens"), std::string::npos) << message;

  // An id past the vocabulary is refused; a writer dropped unfinished leaves no file behind.
  {
    TokenFileWriter w(dir / "unfinished.tokens", info);
    w.append(ramp(10, 300));
    message = tf::testing::error_message<InputError>([&] { w.append(std::vector<int32_t>{300}); });
    EXPECT_NE(message.find("id 300 does not fit"), std::string::npos) << message;
  }
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find("unfinished"), std::string::npos) << entry.path();
}

TEST(TokenFile, WidthFollowsTheVocabulary) {
  EXPECT_EQ(token_width(1), 2);
  EXPECT_EQ(token_width(65536), 2);  // ids 0..65535 fit uint16
  EXPECT_EQ(token_width(65537), 4);
}

}  // namespace
}  // namespace tf::data

// The token cache: miss then hit, keys that separate texts and tokenizers, corrupted files rebuilt.
#include "data/dataset.h"

#include <gtest/gtest.h>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::read_file;
using tf::testing::TempDir;
using tf::testing::write_file;

const std::string kText = "The jury said it did find that many of Georgia's registration laws are outmoded.\n";

TEST(Fnv1a, KnownValues) {
  // Reference values of the FNV-1a 64-bit hash (from its authors' test suite).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
}

TEST(TokenCache, MissThenHit) {
  TempDir dir;
  const BpeTokenizer tok = BpeTokenizer::train(kText + kText, 300);
  const TokenIds first = tokenize_cached(kText, tok, dir / "cache");
  EXPECT_EQ(first.source, CacheSource::miss);
  EXPECT_EQ(first.ids, tok.encode(kText));
  EXPECT_TRUE(std::filesystem::exists(first.file));
  const TokenIds second = tokenize_cached(kText, tok, dir / "cache");
  EXPECT_EQ(second.source, CacheSource::hit);
  EXPECT_EQ(second.file, first.file);
  EXPECT_EQ(second.ids, first.ids);
}

TEST(TokenCache, KeyDependsOnTextAndTokenizer) {
  TempDir dir;
  CharTokenizer tok = CharTokenizer::train(kText);
  const TokenIds a = tokenize_cached(kText, tok, dir.path());
  EXPECT_EQ(tokenize_cached(kText + " ", tok, dir.path()).source, CacheSource::miss);
  tok.add_special("[PAD]");  // a different serialised form: ids could differ, so no reuse
  const TokenIds b = tokenize_cached(kText, tok, dir.path());
  EXPECT_EQ(b.source, CacheSource::miss);
  EXPECT_NE(b.file, a.file);
}

TEST(TokenCache, CorruptedFilesAreRebuiltNeverTrusted) {
  TempDir dir;
  const CharTokenizer tok = CharTokenizer::train(kText);
  const std::vector<int32_t> truth = tok.encode(kText);
  const std::filesystem::path file = tokenize_cached(kText, tok, dir.path()).file;
  const std::string good = read_file(file);
  ASSERT_EQ(good.size(), 32 + 4 * truth.size());

  std::string flipped_id = good;
  flipped_id[32 + 4 * 5] ^= 0x01;  // one id changes: only the checksum can tell
  std::string flipped_count = good;
  flipped_count[16] ^= 0x01;
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  for (const std::string& corrupt : {good.substr(0, good.size() - 4), good.substr(0, 20), std::string(), flipped_id,
                                     flipped_count, bad_magic, good + "extra"}) {
    write_file(file, corrupt);
    const TokenIds t = tokenize_cached(kText, tok, dir.path());
    EXPECT_EQ(t.source, CacheSource::rebuilt) << "corrupt file of " << corrupt.size() << " bytes";
    EXPECT_EQ(t.ids, truth);
    EXPECT_EQ(read_file(file), good);  // rewritten
  }
}

}  // namespace
}  // namespace tf::data

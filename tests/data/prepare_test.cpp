// Corpus preparation: chunked parallel encoding gives the ids of encoding the whole text at once; the
// split rules; warm starts; a changed, damaged or invalid corpus; globs and folders.
#include "data/prepare.h"

#include <gtest/gtest.h>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/hash.h"
#include "data/sources.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::error_message;
using tf::testing::TempDir;
using tf::testing::write_file;
namespace fs = std::filesystem;

// Text with what chunk boundaries could break: multi-byte characters, runs of spaces and tabs,
// contractions, blank lines. A 64-bit LCG makes it the same everywhere.
std::string mixed_text(size_t bytes, uint64_t seed) {
  static const char* const kPieces[] = {"the", "river", "don't", "we'll", "naïve", "日本語", "—", "42", "3.14",
                                        " ",   "  ",    "\t",    "\n",    "\n\n",  ",",      "'", "x"};
  std::string text;
  uint64_t state = seed;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t r = state >> 33;
    text += kPieces[r % (sizeof kPieces / sizeof kPieces[0])];
    if (r % 3 != 0) text += ' ';
  }
  return text;
}

TEST(Fnv1a, KnownValues) {
  // Reference values of the FNV-1a 64-bit hash (from its authors' test suite).
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
}

TEST(SplitPoint, BothSidesEncodeAsTheWholeDoes) {
  const std::string text = mixed_text(3000, 1);
  const CharTokenizer chars = CharTokenizer::train(text);
  const BpeTokenizer bpe = BpeTokenizer::train(text, 400);
  for (const Tokenizer* tok : {static_cast<const Tokenizer*>(&chars), static_cast<const Tokenizer*>(&bpe)}) {
    const std::vector<int32_t> whole = tok->encode(text);
    int cuts = 0;
    for (size_t at = 0; at < text.size(); at += 37) {
      const size_t p = tok->split_point(text, at);
      if (p == text.size()) continue;
      ASSERT_GE(p, std::max<size_t>(at, 1));
      std::vector<int32_t> pieces = tok->encode(std::string_view(text).substr(0, p));
      const std::vector<int32_t> right = tok->encode(std::string_view(text).substr(p));
      pieces.insert(pieces.end(), right.begin(), right.end());
      ASSERT_EQ(pieces, whole) << tok->kind() << " cut at " << p;
      ++cuts;
    }
    EXPECT_GT(cuts, 50) << tok->kind();
  }
}

class Prepare : public ::testing::Test {
 protected:
  PrepareOptions options(size_t chunk_bytes = 97) const {
    PrepareOptions o;
    o.cache_dir = dir_ / "cache";
    o.chunk_bytes = chunk_bytes;  // small chunks: many boundaries, many parallel batches
    return o;
  }
  TempDir dir_;
};

TEST_F(Prepare, ShardsHoldTheIdsOfEncodingTheJoinedTextAtOnce) {
  // Three files (fewer than ten): the last 10% of the joined text is held out at a line break. Each
  // file is encoded on its own, followed by the joining line break.
  std::vector<std::string> documents;
  for (int i = 0; i < 3; ++i) {
    documents.push_back(mixed_text(2000 + 311 * i, 10 + i) + (i == 2 ? "\nthe river €" : ""));
    write_file(dir_ / "corpus" / ("f" + std::to_string(i) + ".txt"), documents.back());
  }
  const std::string joined = documents[0] + "\n" + documents[1] + "\n" + documents[2];
  size_t cut = joined.size() - joined.size() / 10;
  cut = joined.find('\n', cut) + 1;
  const std::string train = joined.substr(0, cut), val = joined.substr(cut);
  ASSERT_GT(cut, documents[0].size() + documents[1].size() + 2) << "the cut falls in the last file";
  const auto encode_documents = [&](const Tokenizer& tok) {
    std::vector<int32_t> ids;
    const std::string last_part = train.substr(documents[0].size() + documents[1].size() + 2);
    for (const std::string& piece : {documents[0] + "\n", documents[1] + "\n", last_part}) {
      const std::vector<int32_t> more = tok.encode(piece);
      ids.insert(ids.end(), more.begin(), more.end());
    }
    return ids;
  };

  for (const char* kind : {"char", "bpe"}) {
    TokenizerSpec spec;
    spec.kind = kind;
    spec.bpe_vocab_size = 420;
    spec.specials = {"[PAD]", "[MASK]"};
    const PreparedCorpus p = prepare_corpus({{(dir_ / "corpus").string()}, {}}, spec, options());
    const std::unique_ptr<Tokenizer> expected =
        spec.kind == "char" ? std::unique_ptr<Tokenizer>(new CharTokenizer(CharTokenizer::train(train, spec.specials)))
                            : std::unique_ptr<Tokenizer>(new BpeTokenizer(BpeTokenizer::train(train, 420, spec.specials)));
    EXPECT_EQ(p.tokenizer->to_string(), expected->to_string()) << kind;
    EXPECT_EQ(p.train.tokens.to_vector(), encode_documents(*expected)) << kind;
    if (spec.kind == "char") {
      EXPECT_EQ(p.train.tokens.to_vector(), expected->encode(train));
    }
    EXPECT_EQ(p.val.tokens.to_vector(), expected->encode(val)) << kind;
    EXPECT_EQ(p.train.document_starts.size(), 3u);
    int64_t characters = 0;
    for (const char b : val) characters += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
    EXPECT_EQ(p.val.info.characters, static_cast<uint64_t>(characters));
    EXPECT_EQ(p.val.info.unknown, static_cast<uint64_t>(expected->count_unknown(expected->encode(val))));
    if (spec.kind == "char") {
      EXPECT_EQ(p.val.info.unknown, 1u) << "the euro sign is only in the validation text";
    }
    EXPECT_FALSE(p.reused);

    // Warm: the same shards, mapped, no text read.
    const PreparedCorpus again = prepare_corpus({{(dir_ / "corpus").string()}, {}}, spec, options());
    EXPECT_TRUE(again.reused);
    EXPECT_EQ(again.train.tokens.to_vector(), p.train.tokens.to_vector());
    EXPECT_EQ(again.folder, p.folder);
  }
}

TEST_F(Prepare, EveryTenthFileIsHeldOutFromTenFilesOn) {
  std::string train, val;
  for (int i = 0; i < 23; ++i) {
    const std::string text = mixed_text(200 + i, 40 + i);
    write_file(dir_ / "many" / (std::string(i < 10 ? "0" : "") + std::to_string(i) + ".txt"), text);
    std::string& part = i % 10 == 9 ? val : train;
    part += (part.empty() ? "" : "\n") + text;
  }
  const PreparedCorpus p = prepare_corpus({{(dir_ / "many").string()}, {}}, {}, options());
  const CharTokenizer expected = CharTokenizer::train(train);
  EXPECT_EQ(p.train.tokens.to_vector(), expected.encode(train));
  EXPECT_EQ(p.val.tokens.to_vector(), expected.encode(val));
  EXPECT_EQ(p.val.document_starts.size(), 2u);  // files 09 and 19
  EXPECT_NE(p.description.find("every tenth file (2 files"), std::string::npos) << p.description;
}

TEST_F(Prepare, ABpeSampleSmallerThanTheCorpusStillEncodesAllOfIt) {
  const std::string text = mixed_text(40000, 3);
  write_file(dir_ / "big.txt", text);
  TokenizerSpec spec;
  spec.kind = "bpe";
  spec.bpe_vocab_size = 350;
  spec.sample_bytes = 5000;
  const PreparedCorpus p = prepare_corpus({{(dir_ / "big.txt").string()}, {(dir_ / "big.txt").string()}}, spec,
                                          options(1000));
  EXPECT_EQ(p.val.tokens.to_vector(), p.tokenizer->encode(text));
  EXPECT_LE(p.tokenizer->vocab_size(), 350);
  EXPECT_LE(p.sample_bytes, 5000u);
  EXPECT_GT(p.sample_bytes, 3000u) << "a share of every chunk, cut at line breaks";
}

TEST_F(Prepare, AChangedOrDamagedCorpusIsPreparedAgainSayingWhy) {
  write_file(dir_ / "c" / "a.txt", mixed_text(3000, 5));
  write_file(dir_ / "c" / "b.txt", mixed_text(3000, 6));
  std::ostringstream said;
  PrepareOptions o = options();
  o.progress = &said;
  const PreparedCorpus first = prepare_corpus({{(dir_ / "c").string()}, {}}, {}, o);
  write_file(dir_ / "c" / "b.txt", mixed_text(3100, 7));
  const PreparedCorpus second = prepare_corpus({{(dir_ / "c").string()}, {}}, {}, o);
  EXPECT_FALSE(second.reused);
  EXPECT_NE(said.str().find("b.txt' changed since the shards were made"), std::string::npos) << said.str();
  EXPECT_NE(second.val.tokens.to_vector(), first.val.tokens.to_vector());

  // A truncated shard in the cache: made again from the text, the same ids.
  const fs::path shard = second.folder / "train.tokens";
  const std::vector<int32_t> ids = second.train.tokens.to_vector();
  fs::resize_file(shard, fs::file_size(shard) - 2);
  said.str("");
  const PreparedCorpus third = prepare_corpus({{(dir_ / "c").string()}, {}}, {}, o);
  EXPECT_NE(said.str().find("truncated"), std::string::npos) << said.str();
  EXPECT_EQ(third.train.tokens.to_vector(), ids);
}

TEST_F(Prepare, WithoutWritingItCountsTheIdsAndLeavesNoFile) {
  write_file(dir_ / "t.txt", mixed_text(5000, 8));
  PrepareOptions o = options();
  o.write = false;
  const PreparedCorpus counted = prepare_corpus({{(dir_ / "t.txt").string()}, {}}, {}, o);
  EXPECT_FALSE(fs::exists(dir_ / "cache"));
  const PreparedCorpus written = prepare_corpus({{(dir_ / "t.txt").string()}, {}}, {}, options());
  EXPECT_EQ(counted.train_count, written.train.tokens.size());
  EXPECT_EQ(counted.val_count, written.val.tokens.size());
}

TEST_F(Prepare, BadTextNamesTheFileAndTheByteOffset) {
  std::string text = mixed_text(500, 9);
  text[301] = static_cast<char>(0xFF);
  write_file(dir_ / "bad" / "x.txt", text);
  const std::string message =
      error_message<InputError>([&] { prepare_corpus({{(dir_ / "bad").string()}, {}}, {}, options(64)); });
  EXPECT_NE(message.find("x.txt' is not valid UTF-8: byte offset 301 (byte 0xff)"), std::string::npos) << message;

  write_file(dir_ / "empty" / "a.txt", "");
  EXPECT_NE(error_message<InputError>([&] { prepare_corpus({{(dir_ / "empty").string()}, {}}, {}, options()); })
                .find("': the training text is empty (every file of it has 0 bytes)"),
            std::string::npos);
}

TEST(Sources, FoldersAndGlobsResolveSortedSkippingHiddenNames) {
  TempDir dir;
  for (const char* f : {"k/b.c", "k/a.h", "k/sub/z.c", "k/sub/deep/y.c", "k/.git/x.c", "k/.hidden.c", "k/notes.txt"})
    write_file(dir / f, "int x;\n");
  const auto names = [&](const std::vector<SourceFile>& files) {
    std::vector<std::string> out;
    for (const auto& f : files) out.push_back(fs::path(f.path).lexically_relative(dir.path()).string());
    return out;
  };
  EXPECT_EQ(names(resolve_sources({(dir / "k").string()}, "key")),
            (std::vector<std::string>{"k/a.h", "k/b.c", "k/notes.txt", "k/sub/deep/y.c", "k/sub/z.c"}));
  EXPECT_EQ(names(resolve_sources({(dir / "k/**/*.c").string()}, "key")),
            (std::vector<std::string>{"k/b.c", "k/sub/deep/y.c", "k/sub/z.c"}));
  EXPECT_EQ(names(resolve_sources({(dir / "k/*.[ch]").string(), (dir / "k/b.c").string()}, "key")),
            (std::vector<std::string>{"k/a.h", "k/b.c"}));  // no repeats
  std::string message = error_message<InputError>([&] { resolve_sources({(dir / "k/*.rs").string()}, "data.train_path"); });
  EXPECT_NE(message.find("data.train_path: the glob '"), std::string::npos) << message;
  EXPECT_NE(message.find("matches no files"), std::string::npos) << message;
  message = error_message<InputError>([&] { resolve_sources({(dir / "nope.txt").string()}, "data.val_path"); });
  EXPECT_NE(message.find("data.val_path: '"), std::string::npos) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;

  // The fingerprint follows size and modification time.
  const auto before = resolve_sources({(dir / "k").string()}, "key");
  write_file(dir / "k/a.h", "int xy;\n");
  const auto after = resolve_sources({(dir / "k").string()}, "key");
  EXPECT_NE(listing_fingerprint(before), listing_fingerprint(after));
  EXPECT_TRUE(source_change(before[0]).has_value());
  EXPECT_FALSE(source_change(after[0]).has_value());
}

}  // namespace
}  // namespace tf::data

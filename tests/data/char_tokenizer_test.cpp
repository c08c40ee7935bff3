// Character tokenizer: vocabulary order, round trips, <unk>, specials and the serialised form.
#include "data/char_tokenizer.h"

#include <gtest/gtest.h>

#include "framework/error.h"

namespace tf::data {
namespace {

TEST(CharTokenizer, VocabularyIsSortedCodePointsAfterUnk) {
  // "é" is U+00E9, "€" U+20AC: sorted by code point after the ASCII letters.
  const CharTokenizer tok = CharTokenizer::train("\xE2\x82\xAC" "ba\xC3\xA9" "ab");
  EXPECT_EQ(tok.vocab_size(), 5);
  EXPECT_EQ(tok.code_points(), (std::vector<char32_t>{U'a', U'b', 0xE9, 0x20AC}));
  EXPECT_EQ(tok.encode("ab\xC3\xA9\xE2\x82\xAC"), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(tok.id_of("<unk>"), 0);
}

TEST(CharTokenizer, RoundTripsTextOfItsVocabulary) {
  const std::string text = "The jury said \"no\" \xE2\x80\x94 na\xC3\xAFve caf\xC3\xA9 \xF0\x9D\x84\x9E.\n";
  const CharTokenizer tok = CharTokenizer::train(text);
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids.size(), 35u);  // code points, not bytes
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(CharTokenizer, UnknownCharactersAndBadBytesBecomeUnk) {
  const CharTokenizer tok = CharTokenizer::train("abc");
  EXPECT_EQ(tok.encode("axc"), (std::vector<int32_t>{1, 0, 3}));
  EXPECT_EQ(tok.encode("a\xFF\xC3"), (std::vector<int32_t>{1, 0, 0}));  // one <unk> per invalid byte
  EXPECT_EQ(tok.decode(tok.encode("axc")), "a<unk>c");
}

TEST(CharTokenizer, SpecialsFollowTheVocabulary) {
  CharTokenizer tok = CharTokenizer::train("ab", {"[PAD]", "[MASK]"});
  EXPECT_EQ(tok.id_of("[PAD]"), 3);
  EXPECT_EQ(tok.id_of("[MASK]"), 4);
  EXPECT_EQ(tok.add_special("[CLS]"), 5);
  EXPECT_EQ(tok.add_special("[PAD]"), 3);  // already there
  EXPECT_EQ(tok.add_special("<unk>"), 0);  // built in
  EXPECT_TRUE(tok.has_special("<unk>"));
  EXPECT_EQ(tok.vocab_size(), 6);
  EXPECT_EQ(tok.special_ids(), (std::vector<int32_t>{0, 3, 4, 5}));
  EXPECT_EQ(tok.encode("[PAD]"), (std::vector<int32_t>{0, 0, 0, 0, 0}));  // text never yields a special
  const std::vector<int32_t> ids = {1, 4, 2};
  EXPECT_EQ(tok.decode(ids), "a[MASK]b");
  EXPECT_THROW(tok.id_of("[SEP]"), InputError);
  EXPECT_THROW(tok.add_special("two words"), InputError);
  const std::vector<int32_t> bad = {6};
  EXPECT_THROW(tok.decode(bad), Error);
}

TEST(CharTokenizer, SerialisedFormRebuildsTheSameTokenizer) {
  const std::string text = "Hello, w\xC3\xB6rld \xF0\x9F\x99\x82!";
  const CharTokenizer tok = CharTokenizer::train(text, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  const std::string form = tok.to_string();
  const std::unique_ptr<Tokenizer> back = Tokenizer::from_string(form);
  EXPECT_EQ(back->kind(), "char");
  EXPECT_EQ(back->to_string(), form);
  EXPECT_EQ(back->vocab_size(), tok.vocab_size());
  EXPECT_EQ(back->encode(text + "?"), tok.encode(text + "?"));
  EXPECT_EQ(back->id_of("[SEP]"), tok.id_of("[SEP]"));

  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer char 1\ncode_points 2\nU+0041\n"), InputError);
  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer char 1\ncode_points 1\nU+D800\nspecials 0\n"), InputError);
  EXPECT_THROW(Tokenizer::from_string("something else"), InputError);
}

}  // namespace
}  // namespace tf::data

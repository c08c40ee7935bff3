// The ids tokenizer (a corpus tokenized elsewhere): ids written as decimal numbers read back as
// themselves, decode's pieces join, a cut at split_point encodes as the whole, specials keep their
// names, and a word that is no id is refused naming it.
#include "data/ids_tokenizer.h"

#include <gtest/gtest.h>

#include "support/errors.h"

namespace tf::data {
namespace {

TEST(IdsTokenizer, IdsAreTheirOwnTokensAndDecodedPiecesJoin) {
  const IdsTokenizer tok(50257);
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.encode("464 3290\n257\t 0  50256 "), (std::vector<int32_t>{464, 3290, 257, 0, 50256}));
  EXPECT_TRUE(tok.encode(" \n ").empty());
  const std::vector<int32_t> a = {464, 3290}, b = {257, 50256};
  EXPECT_EQ(tok.decode(a), " 464 3290");
  std::vector<int32_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  EXPECT_EQ(tok.decode(a) + tok.decode(b), tok.decode(both));
  EXPECT_EQ(tok.encode(tok.decode(both)), both);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{50257}), Error);
}

TEST(IdsTokenizer, TextCutAtASplitPointEncodesAsTheWhole) {
  const IdsTokenizer tok(1000);
  const std::string text = "12 7 999 0 45\n3 3 871";
  const std::vector<int32_t> whole = tok.encode(text);
  for (size_t at = 0; at < text.size(); ++at) {
    const size_t p = tok.split_point(text, at);
    ASSERT_GE(p, std::max<size_t>(at, 1));
    std::vector<int32_t> joined = tok.encode(text.substr(0, p));
    const std::vector<int32_t> rest = tok.encode(text.substr(p));
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, whole) << "cut at " << p;
  }
}

TEST(IdsTokenizer, SpecialsFollowTheVocabularyAndSurviveTheSerialisedForm) {
  IdsTokenizer tok(100);
  EXPECT_EQ(tok.add_special("[PAD]"), 100);
  EXPECT_EQ(tok.add_special("[MASK]"), 101);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{7, 101}), " 7 [MASK]");
  EXPECT_EQ(tok.encode("7 [MASK]"), (std::vector<int32_t>{7, 101}));
  const auto back = Tokenizer::from_string(tok.to_string());
  EXPECT_EQ(back->kind(), "ids");
  EXPECT_EQ(back->vocab_size(), 102);
  EXPECT_EQ(back->id_of("[MASK]"), 101);
  EXPECT_EQ(back->to_string(), tok.to_string());
  EXPECT_EQ(tok.to_string(), "tapeformer-tokenizer ids 1\nvocab 100\nspecials 2\n[PAD]\n[MASK]\n");
}

TEST(IdsTokenizer, AWordThatIsNoIdIsRefusedNamingItAndItsOffset) {
  const IdsTokenizer tok(100);
  for (const auto& [text, word] : std::vector<std::pair<std::string, std::string>>{
           {"5 The 6", "'The' at byte 2"}, {"5 100", "'100' at byte 2"}, {"-1", "'-1' at byte 0"}, {"5x", "'5x' at byte 0"}}) {
    const std::string message = testing::error_message<InputError>([&] { tok.encode(text); });
    EXPECT_NE(message.find(word), std::string::npos) << message;
    EXPECT_NE(message.find("ids in [0, 100)"), std::string::npos) << message;
  }
  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer ids 1\nvocab 0\nspecials 0\n"), InputError);
  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer ids 1\nspecials 0\n"), InputError);
}

}  // namespace
}  // namespace tf::data

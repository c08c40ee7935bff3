// Byte-level BPE: pre-tokenisation, a hand-worked training example, agreement with a naive
// full-recount trainer and a naive encoder, exact round trips on random bytes, serialisation.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <map>

#include "framework/error.h"
#include "framework/random.h"

namespace tf::data {
namespace {

// Pseudo-English: common words, and made-up words of one to three syllables, with punctuation
// and line breaks.
std::string english(uint64_t seed, int n_words) {
  static const char* words[] = {"the", "jury", "said", "that", "election", "was", "conducted", "in", "a",
                                "manner", "of", "city", "Atlanta", "and", "it", "reports", "received", "primary",
                                "investigation", "there", "they", "then", "these", "theory", "1961", "didn't"};
  static const char* syllables[] = {"re", "con", "tion", "ing", "ed", "pro", "ter", "al", "ment", "com", "de",
                                    "in", "st", "ly", "er", "ous", "ver", "an", "ble", "ca", "mo", "pi", "su"};
  Rng rng(seed);
  std::string text;
  for (int i = 0; i < n_words; ++i) {
    if (i) text += rng.uniform() < 0.05 ? "\n" : " ";
    if (rng.uniform() < 0.6) {
      text += words[rng.uniform_int(std::size(words))];
    } else {
      for (int64_t k = 0, n = 1 + rng.uniform_int(3); k < n; ++k) text += syllables[rng.uniform_int(std::size(syllables))];
    }
    if (rng.uniform() < 0.08) text += rng.uniform() < 0.5 ? "," : ".";
  }
  return text;
}

std::string random_bytes(Rng& rng, int64_t length) {
  std::string s(length, '\0');
  for (char& c : s) c = static_cast<char>(rng.uniform() < 0.15 ? ' ' : rng.uniform_int(256));
  return s;
}

TEST(Pretokenize, Gpt2ClassesSplitsWordsSpacesDigitsAndContractions) {
  const std::vector<std::string_view> chunks =
      pretokenize("Hello  world\n\nIt's 42!\xC3\xA9t\xC3\xA9 ", Pretokenizer::gpt2_classes);
  EXPECT_EQ(chunks, (std::vector<std::string_view>{"Hello", " ", " world", "\n\n", "It", "'s", " 42", "!",
                                                    "\xC3\xA9t\xC3\xA9", " "}));
}

// Each expected split worked out by hand from GPT-2's expression (Note [pre-tokenisation]), alternative
// by alternative, with the characters' Unicode general categories.
TEST(Pretokenize, Gpt2FollowsTheExpression) {
  using Chunks = std::vector<std::string_view>;
  const auto split = [](std::string_view text) { return pretokenize(text, Pretokenizer::gpt2); };
  // \s+(?!\S) leaves a run's last whitespace to what follows: a space leads the word, a newline is alone.
  EXPECT_EQ(split("Hello  world\n\nIt's 42!\xC3\xA9t\xC3\xA9 "),
            (Chunks{"Hello", " ", " world", "\n", "\n", "It", "'s", " 42", "!", "\xC3\xA9t\xC3\xA9", " "}));
  EXPECT_EQ(split("  \n x \t"), (Chunks{"  \n", " x", " \t"}));  // at the end a run stays whole
  // Contractions are lower case ASCII only; "'" is otherwise punctuation, and joins a run of it.
  EXPECT_EQ(split("don't I'LL ?'s"), (Chunks{"don", "'t", " I", "'", "LL", " ?'", "s"}));
  // Unicode classes: an em dash (Pd) and a curly quote (Pf) are punctuation, not letters;
  // Arabic-Indic digits (Nd), a vulgar fraction (No) and a Roman numeral (Nl) are numbers;
  // a no-break space (Zs) is whitespace; U+2EBF0 (CJK Extension I, Unicode 15.1) is a letter.
  EXPECT_EQ(split("a\xE2\x80\x94" "b\xE2\x80\x99"), (Chunks{"a", "\xE2\x80\x94", "b", "\xE2\x80\x99"}));
  EXPECT_EQ(split("x \xD9\xA3\xD9\xA4\xC2\xBD\xE2\x85\xAB"), (Chunks{"x", " \xD9\xA3\xD9\xA4\xC2\xBD\xE2\x85\xAB"}));
  EXPECT_EQ(split("x\xC2\xA0y"), (Chunks{"x", "\xC2\xA0", "y"}));
  EXPECT_EQ(split("\xC2\xA0 y"), (Chunks{"\xC2\xA0", " y"}));
  EXPECT_EQ(split("\xF0\xAE\xAF\xB0x1"), (Chunks{"\xF0\xAE\xAF\xB0x", "1"}));
  // A byte that is not UTF-8 is a symbol of its own (U+FFFD), joining a run of punctuation.
  EXPECT_EQ(split("a\xFF\x80!b\xC3"), (Chunks{"a", "\xFF\x80!", "b", "\xC3"}));
}

TEST(Pretokenize, Gpt2ChunksPartitionAnyBytes) {
  Rng rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const std::string text = random_bytes(rng, 1 + trial % 63);
    std::string joined;
    for (std::string_view chunk : pretokenize(text, Pretokenizer::gpt2)) {
      ASSERT_FALSE(chunk.empty());
      joined += chunk;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(BpeTokenizer, HandWorkedTrainingExample) {
  // Chunks: "ab" " ab" " ab" " cd" " cd" " cd". Pair counts: (' ',c) 3, (a,b) 3, (c,d) 3, (' ',a) 2.
  // 1. The three-way tie goes to the smallest pair (32, 99): " c" = 256.
  // 2. Now (a,b) 3 and (256,d) 3 tie: (97, 98) is smaller: "ab" = 257.
  // 3. (256,d) 3: " cd" = 258.   4. (' ',257) 2: " ab" = 259.
  // Every pair left ((' ',c) and (a,b) are gone) occurs once, so training stops below 300.
  const BpeTokenizer tok = BpeTokenizer::train("ab ab ab cd cd cd", 300);
  const std::vector<BpeTokenizer::Merge> expected = {{' ', 'c'}, {'a', 'b'}, {256, 'd'}, {' ', 257}};
  EXPECT_EQ(tok.merges(), expected);
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.token_bytes(258), " cd");
  EXPECT_EQ(tok.token_bytes(259), " ab");
  EXPECT_EQ(tok.encode("ab cd ab"), (std::vector<int32_t>{257, 258, 259}));
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{257, 'c'}));
}

// Sennrich et al.'s algorithm as written: recount every pair from scratch before each merge.
std::vector<BpeTokenizer::Merge> naive_train(std::string_view text, int n_merges) {
  std::map<std::string_view, int64_t> counts;
  for (std::string_view c : pretokenize(text)) ++counts[c];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [w, f] : counts) words.push_back({std::vector<int32_t>(w.begin(), w.end()), f});
  for (auto& [symbols, f] : words)
    for (int32_t& s : symbols) s = static_cast<unsigned char>(s);
  std::vector<BpeTokenizer::Merge> merges;
  std::vector<std::string> bytes;  // id -> its bytes: a pair spelling a known token is never merged
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  while (static_cast<int>(merges.size()) < n_merges) {
    std::map<BpeTokenizer::Merge, int64_t> pairs;  // ordered: the first maximum is the smallest pair
    for (const auto& [symbols, f] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += f;
    BpeTokenizer::Merge best{};
    int64_t best_count = 1;
    for (const auto& [p, c] : pairs)
      if (c > best_count && std::find(bytes.begin(), bytes.end(), bytes[p.first] + bytes[p.second]) == bytes.end())
        best = p, best_count = c;
    if (best_count < 2) break;
    const int32_t id = 256 + static_cast<int32_t>(merges.size());
    merges.push_back(best);
    bytes.push_back(bytes[best.first] + bytes[best.second]);
    for (auto& [symbols, f] : words) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && BpeTokenizer::Merge{symbols[i], symbols[i + 1]} == best) out.push_back(id), ++i;
        else out.push_back(symbols[i]);
      }
      symbols = out;
    }
  }
  return merges;
}

// Encoding by applying every merge in order over each chunk.
std::vector<int32_t> naive_encode(const BpeTokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids;
  for (std::string_view chunk : pretokenize(text)) {
    std::vector<int32_t> symbols;
    for (char c : chunk) symbols.push_back(static_cast<unsigned char>(c));
    for (size_t r = 0; r < tok.merges().size(); ++r) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && BpeTokenizer::Merge{symbols[i], symbols[i + 1]} == tok.merges()[r])
          out.push_back(256 + static_cast<int32_t>(r)), ++i;
        else out.push_back(symbols[i]);
      }
      symbols = out;
    }
    ids.insert(ids.end(), symbols.begin(), symbols.end());
  }
  return ids;
}

TEST(BpeTokenizer, IncrementalTrainingMatchesFullRecount) {
  const std::string text = english(1, 4000) + " aaaaaaa aaaa aaa bbbbbbbbbb";  // overlapping pairs too
  const BpeTokenizer tok = BpeTokenizer::train(text, 256 + 150);
  EXPECT_EQ(tok.merges(), naive_train(text, 150));
  EXPECT_EQ(tok.merges().size(), 150u);
}

TEST(BpeTokenizer, EncodeMatchesMergesAppliedInOrder) {
  const BpeTokenizer tok = BpeTokenizer::train(english(2, 3000) + " aaaaaaaa", 256 + 120);
  const std::string text = english(3, 500) + " " + std::string(1000, 'a') + " thethethe";
  EXPECT_EQ(tok.encode(text), naive_encode(tok, text));
}

TEST(BpeTokenizer, TrainingIsDeterministic) {
  const std::string text = english(4, 3000);
  const BpeTokenizer a = BpeTokenizer::train(text, 400, {"[PAD]"});
  const BpeTokenizer b = BpeTokenizer::train(text, 400, {"[PAD]"});
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_EQ(a.to_string(), b.to_string());
  EXPECT_EQ(a.vocab_size(), 400);  // specials count towards the target
}

TEST(BpeTokenizer, RoundTripsRandomBytes) {
  const BpeTokenizer tok = BpeTokenizer::train(english(5, 3000), 256 + 200);
  Rng rng(6);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string s = random_bytes(rng, rng.uniform_int(300));  // mostly invalid UTF-8
    const std::vector<int32_t> ids = tok.encode(s);
    ASSERT_EQ(tok.decode(ids), s) << "trial " << trial;
  }
  // A tokenizer trained on random bytes round-trips English and random bytes alike.
  const BpeTokenizer bytes_tok = BpeTokenizer::train(random_bytes(rng, 20000), 256 + 100);
  const std::string s = english(7, 200) + random_bytes(rng, 500);
  EXPECT_EQ(bytes_tok.decode(bytes_tok.encode(s)), s);
}

// A tokenizer keeps the pre-tokenizer it was trained with: one stored before gpt2 still encodes as
// it did, and its name survives the round trip. With a merge of two newlines, "\n\nA" is one chunk
// "\n\n" for gpt2-classes but "\n", "\n" for gpt2.
TEST(BpeTokenizer, EachStoredPreTokenizerVersionLoadsAndKeepsItsCut) {
  const std::string older = "tapeformer-tokenizer bpe 1\npretokenizer gpt2-classes\nmerges 1\n10 10\nspecials 0\n";
  const std::unique_ptr<Tokenizer> a = Tokenizer::from_string(older);
  EXPECT_EQ(a->to_string(), older);
  EXPECT_EQ(a->encode("\n\nA"), (std::vector<int32_t>{256, 'A'}));
  std::string now = older;
  now.replace(now.find("gpt2-classes"), 12, "gpt2");
  const std::unique_ptr<Tokenizer> b = Tokenizer::from_string(now);
  EXPECT_EQ(b->to_string(), now);
  EXPECT_EQ(b->encode("\n\nA"), (std::vector<int32_t>{'\n', '\n', 'A'}));
  EXPECT_EQ(b->encode("\n\n\nA"), (std::vector<int32_t>{256, '\n', 'A'}));
  now.replace(now.find("gpt2"), 4, "gpt4");
  EXPECT_THROW(Tokenizer::from_string(now), InputError);
}

TEST(BpeTokenizer, MergesCompressEnglish) {
  const std::string train = english(8, 5000), held_out = english(9, 1000);
  std::vector<size_t> n_tokens;
  for (int merges : {0, 25, 100, 400}) n_tokens.push_back(BpeTokenizer::train(train, 256 + merges).encode(held_out).size());
  EXPECT_EQ(n_tokens[0], held_out.size());  // no merges: one token per byte
  // Each larger vocabulary compresses held-out text further; 100 merges already cover the common
  // words with their leading space and most syllables (measured: about 0.37 tokens per byte).
  EXPECT_LT(n_tokens[1], n_tokens[0]);
  EXPECT_LT(n_tokens[2], n_tokens[1]);
  EXPECT_LT(n_tokens[3], n_tokens[2]);
  EXPECT_LT(n_tokens[2], held_out.size() / 2);
}

TEST(BpeTokenizer, SerialisedFormGivesIdenticalEncodings) {
  BpeTokenizer tok = BpeTokenizer::train(english(10, 3000), 512, {"[PAD]", "[MASK]", "[CLS]", "[SEP]"});
  const std::string form = tok.to_string();
  const std::unique_ptr<Tokenizer> back = Tokenizer::from_string(form);
  EXPECT_EQ(back->kind(), "bpe");
  EXPECT_EQ(back->to_string(), form);
  EXPECT_EQ(back->vocab_size(), 512);
  EXPECT_EQ(back->id_of("[MASK]"), 509);
  const std::string text = english(11, 800);
  EXPECT_EQ(back->encode(text), tok.encode(text));
  const std::vector<int32_t> ids = {tok.id_of("[CLS]"), 't', 300, tok.id_of("[SEP]")};
  EXPECT_EQ(back->decode(ids), tok.decode(ids));
  EXPECT_EQ(tok.decode(ids).substr(0, 6), "[CLS]t");

  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer bpe 1\npretokenizer gpt2-classes\nmerges 1\n300 1\n"
                                      "specials 0\n"),
               InputError);  // id 300 used before it exists
  EXPECT_THROW(Tokenizer::from_string("tapeformer-tokenizer bpe 1\npretokenizer gpt2-classes\nmerges 2\n97 98\n"),
               InputError);  // truncated
}

// Found by fuzzing: merges that each join the previous token with itself describe a token of
// 2^m bytes in a few hundred bytes of serialised form. Tokens are capped at kMaxTokenBytes.
TEST(BpeTokenizer, TokensAreCappedInTrainingAndInTheSerialisedForm) {
  std::string form = "tapeformer-tokenizer bpe 1\npretokenizer gpt2-classes\nmerges 40\n97 97\n";
  for (int r = 1; r < 40; ++r) form += std::to_string(255 + r) + " " + std::to_string(255 + r) + "\n";
  form += "specials 0\n";
  EXPECT_THROW(Tokenizer::from_string(form), InputError);

  // A run of 5000 'a' twice: doubling merges stop at the largest power of two within the cap.
  const std::string run(5000, 'a');
  const BpeTokenizer tok = BpeTokenizer::train(run + " " + run, 256 + 30);
  size_t longest = 0;
  for (int32_t id = 256; id < 256 + static_cast<int32_t>(tok.merges().size()); ++id)
    longest = std::max(longest, tok.token_bytes(id).size());
  EXPECT_EQ(longest, BpeTokenizer::kMaxTokenBytes);
  EXPECT_EQ(tok.decode(tok.encode(run)), run);
  EXPECT_EQ(Tokenizer::from_string(tok.to_string())->encode(run), tok.encode(run));
}

}  // namespace
}  // namespace tf::data

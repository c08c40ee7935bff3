// Fuzz target: the tokenizers (data/char_tokenizer.h, data/bpe_tokenizer.h, data/tokenizer.h):
// training, encoding and decoding arbitrary bytes, and deserialising arbitrary text.
//
// Input: any bytes. Each run (1) trains a char and a byte-level BPE tokenizer on the input and checks
// their documented invariants, (2) reads the input as a serialised tokenizer with
// Tokenizer::from_string, and (3) decodes the input read as int32 ids.
// Expected: success, tf::InputError for a malformed serialised form, and tf::Error from decode()
// only when an id is outside [0, vocab_size()) (tokenizer.h). Invariants checked:
//   - pretokenize's chunks partition the text (bpe_tokenizer.h, Note [pre-tokenisation]);
//   - BPE: decode(encode(s)) == s for every byte string, ids in [0, base vocabulary);
//   - char: decode(encode(s)) == s when s is valid UTF-8 made of trained characters;
//   - from_string(to_string()) rebuilds a tokenizer with the same form and the same encoding.
#include <cstring>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "data/text.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace tf;
using data::Tokenizer;

void check_round_trip_form(const Tokenizer& tok, std::string_view probe) {
  const std::string form = tok.to_string();
  std::unique_ptr<Tokenizer> back;
  try {
    back = Tokenizer::from_string(form);
  } catch (const InputError& e) {
    fuzz::violated(concat("to_string() of a ", tok.kind(), " tokenizer does not read back: ", e.what()));
  }
  TF_FUZZ_EXPECT(back->to_string() == form, "the serialised form changes on a round trip");
  TF_FUZZ_EXPECT(back->vocab_size() == tok.vocab_size(), back->vocab_size(), " vs ", tok.vocab_size());
  TF_FUZZ_EXPECT(back->encode(probe) == tok.encode(probe), "a reread tokenizer encodes differently");
}

// decode() of arbitrary ids: tf::Error exactly when some id is outside the vocabulary.
void check_decode_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  bool in_range = true;
  for (int32_t id : ids) in_range = in_range && id >= 0 && id < tok.vocab_size();
  try {
    tok.decode(ids);
    TF_FUZZ_EXPECT(in_range, "decode accepted an id outside the vocabulary");
  } catch (const InputError& e) {
    fuzz::violated(concat("decode threw InputError (documented: tf::Error): ", e.what()));
  } catch (const Error& e) {
    TF_FUZZ_EXPECT(!in_range, "decode refused ids that are all in range: ", e.what());
  }
}

void check_bpe(std::string_view text, int32_t vocab_size) {
  const auto tok = data::BpeTokenizer::train(text, vocab_size, {"[PAD]", "[MASK]"});
  TF_FUZZ_EXPECT(tok.vocab_size() <= vocab_size, tok.vocab_size(), " > ", vocab_size);
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) TF_FUZZ_EXPECT(id >= 0 && id < tok.vocab_size() - 2, "encode produced id ", id);
  TF_FUZZ_EXPECT(tok.decode(ids) == text, "BPE decode(encode(s)) != s");
  check_round_trip_form(tok, text);
}

void check_char(std::string_view text) {
  const auto tok = data::CharTokenizer::train(text, {"[MASK]"});
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) TF_FUZZ_EXPECT(id >= 0 && id < tok.vocab_size() - 1, "encode produced id ", id);
  if (data::first_invalid_utf8(text) == std::string_view::npos)
    TF_FUZZ_EXPECT(tok.decode(ids) == text, "char decode(encode(s)) != s for valid UTF-8");
  check_round_trip_form(tok, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);

  std::string joined;
  for (std::string_view chunk : data::pretokenize(text)) {
    TF_FUZZ_EXPECT(!chunk.empty(), "pretokenize produced an empty chunk");
    joined += chunk;
  }
  TF_FUZZ_EXPECT(joined == text, "pretokenize's chunks do not partition the text");

  // The first byte picks the BPE vocabulary: 260..515, from "no merges" up to a few hundred.
  check_bpe(text, 260 + (size > 0 ? data[0] : 0));
  check_char(text);

  std::unique_ptr<data::Tokenizer> read;
  if (fuzz::refused_ok([&] { read = data::Tokenizer::from_string(text); })) {
    check_round_trip_form(*read, text);
    const std::string decoded = read->decode(read->encode(text));
    if (read->kind() == "bpe") TF_FUZZ_EXPECT(decoded == text, "BPE (read) decode(encode(s)) != s");
  }

  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  check_decode_ids(data::CharTokenizer::train(text), ids);
  if (read) check_decode_ids(*read, ids);
  return 0;
}

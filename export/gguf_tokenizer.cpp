// Tokenizers as GGUF metadata (export/gguf_tokenizer.h).
#include "export/gguf_tokenizer.h"

#include <set>

#include "data/bpe_tokenizer.h"
#include "data/char_tokenizer.h"
#include "framework/error.h"

namespace tf::exporting {

namespace {

// llama.cpp's token types (llama.h: LLAMA_TOKEN_TYPE_*).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3;
constexpr char32_t kSpaceMark = 0x2581;  // SentencePiece's "▁", which stands for a space

void add_char_tokenizer(GgufFile& file, const data::CharTokenizer& tokenizer) {
  const std::vector<char32_t>& code_points = tokenizer.code_points();
  for (const char32_t cp : code_points)
    TF_CHECK_INPUT(cp != kSpaceMark, "the character vocabulary holds U+2581 ('\xE2\x96\x81'), the mark that GGUF's "
                   "SentencePiece vocabulary uses for a space: llama.cpp could not tell the two apart");
  std::vector<std::string> tokens{"<unk>"};
  std::vector<int32_t> types{kUnknown};
  for (const char32_t cp : code_points) {
    std::string piece;
    data::utf8_append(piece, cp == U' ' ? kSpaceMark : cp);
    tokens.push_back(std::move(piece));
    types.push_back(kNormal);
  }
  for (int32_t id = static_cast<int32_t>(tokens.size()); id < tokenizer.vocab_size(); ++id) {
    tokens.push_back(tokenizer.decode(std::vector<int32_t>{id}));  // a special's name ("[MASK]")
    types.push_back(kControl);
  }
  const std::vector<float> scores(tokens.size(), 0.0f);  // no merges: every piece is one character
  file.set("tokenizer.ggml.model", std::string("t5"));  // llama.cpp's unigram (UGM) tokenizer: Note [char vocabulary in GGUF]
  file.set("tokenizer.ggml.tokens", tokens);
  file.set("tokenizer.ggml.scores", scores);
  file.set("tokenizer.ggml.token_type", types);
  const auto unk = static_cast<uint32_t>(data::CharTokenizer::kUnknown);
  file.set("tokenizer.ggml.unknown_token_id", unk);
  file.set("tokenizer.ggml.bos_token_id", unk);
  file.set("tokenizer.ggml.eos_token_id", unk);
  file.set("tokenizer.ggml.add_bos_token", false);
  file.set("tokenizer.ggml.add_eos_token", false);
  file.set("tokenizer.ggml.add_space_prefix", false);
  file.set("tokenizer.ggml.remove_extra_whitespaces", false);
}

// GPT-2's byte-to-unicode table (its encoder.py, bytes_to_unicode): the printable bytes ('!'..'~',
// 0xA1..0xAC, 0xAE..0xFF) stand for themselves, the other 68 for U+0100 onwards in byte order, so
// that every byte string is a printable string without spaces (a merge line is "left right").
char32_t byte_as_unicode(unsigned char byte) {
  const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  if (printable(byte)) return byte;
  char32_t next = 0x100;
  for (int b = 0; b < byte; ++b) next += !printable(b);
  return next;
}

std::string bytes_as_unicode(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) data::utf8_append(out, byte_as_unicode(static_cast<unsigned char>(c)));
  return out;
}

// Note [BPE vocabulary in GGUF] in gguf_tokenizer.h.
void add_bpe_tokenizer(GgufFile& file, const data::BpeTokenizer& tokenizer) {
  TF_CHECK_INPUT(tokenizer.pretokenizer() == data::Pretokenizer::gpt2,
                 "the BPE tokenizer was trained with the older pre-tokenizer 'gpt2-classes', which no llama.cpp "
                 "pre-tokenizer equals (bpe_tokenizer.h, Note [pre-tokenisation]): llama.cpp would cut some texts "
                 "into other ids. Train the model again (tapeformer now trains BPE with 'gpt2'), or export it "
                 "as safetensors or weights");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int32_t id = 0; id < 256 + static_cast<int32_t>(tokenizer.merges().size()); ++id) {
    tokens.push_back(bytes_as_unicode(id < 256 ? std::string(1, static_cast<char>(id)) : tokenizer.token_bytes(id)));
    types.push_back(kNormal);
  }
  for (int32_t id = static_cast<int32_t>(tokens.size()); id < tokenizer.vocab_size(); ++id) {
    tokens.push_back(tokenizer.decode(std::vector<int32_t>{id}));  // a special's name ("[MASK]")
    types.push_back(kControl);
  }
  std::set<std::string_view> distinct;
  for (size_t id = 0; id < tokens.size(); ++id)
    TF_CHECK_INPUT(distinct.insert(tokens[id]).second, "the BPE vocabulary spells id ", id, " ('", tokens[id],
                   "') as an earlier id: llama.cpp finds a token by its text, so it could not tell them apart");
  std::vector<std::string> merges;
  for (const auto& [left, right] : tokenizer.merges()) merges.push_back(tokens[left] + " " + tokens[right]);
  file.set("tokenizer.ggml.model", std::string("gpt2"));  // llama.cpp's byte-level BPE
  file.set("tokenizer.ggml.pre", std::string("gpt-2"));   // GPT-2's expression: tapeformer's gpt2 pre-tokenizer
  file.set("tokenizer.ggml.tokens", tokens);
  file.set("tokenizer.ggml.token_type", types);
  file.set("tokenizer.ggml.merges", merges);
  const auto never = static_cast<uint32_t>(0xFF);  // byte 0xFF: never in UTF-8 text, so never a training target
  file.set("tokenizer.ggml.bos_token_id", never);
  file.set("tokenizer.ggml.eos_token_id", never);
  file.set("tokenizer.ggml.add_bos_token", false);
  file.set("tokenizer.ggml.add_eos_token", false);
}

}  // namespace

void add_gguf_tokenizer(GgufFile& file, const data::Tokenizer& tokenizer) {
  if (const auto* chars = dynamic_cast<const data::CharTokenizer*>(&tokenizer)) return add_char_tokenizer(file, *chars);
  if (const auto* bpe = dynamic_cast<const data::BpeTokenizer*>(&tokenizer)) return add_bpe_tokenizer(file, *bpe);
  TF_CHECK_INPUT(false, "GGUF export of the '", tokenizer.kind(),
                 "' tokenizer is not supported: the character and the BPE tokenizers export to GGUF; export the "
                 "model as safetensors or weights instead");
}

}  // namespace tf::exporting

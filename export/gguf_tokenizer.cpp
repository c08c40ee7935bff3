// Tokenizers as GGUF metadata (export/gguf_tokenizer.h).
#include "export/gguf_tokenizer.h"

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

}  // namespace

void add_gguf_tokenizer(GgufFile& file, const data::Tokenizer& tokenizer) {
  if (const auto* chars = dynamic_cast<const data::CharTokenizer*>(&tokenizer)) return add_char_tokenizer(file, *chars);
  TF_CHECK_INPUT(false, "GGUF export of the '", tokenizer.kind(),
                 "' tokenizer is not supported yet: only the character tokenizer (data.tokenizer: char) exports to "
                 "GGUF; export the model as safetensors or weights instead");
}

}  // namespace tf::exporting

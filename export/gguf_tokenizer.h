// A tapeformer tokenizer as GGUF's tokenizer.ggml.* metadata, chosen so that llama.cpp cuts a text
// into the ids tapeformer gives it (docs/export.md, "Tokenizers in GGUF").
//
// Note [char vocabulary in GGUF]: the character tokenizer becomes a vocabulary of exactly its ids for
// llama.cpp's unigram tokenizer (tokenizer.ggml.model "t5", SentencePiece's unigram model): id 0 "<unk>"
// (type unknown), then one piece per code point, the space written as U+2581 as SentencePiece writes
// it (llama.cpp turns each space of a prompt into it), all of score 0. With pieces of one character
// each, the unigram model's best cut is one piece per character: tapeformer's ids. A character outside
// the vocabulary becomes <unk> in both, except that llama.cpp merges a run of them into one <unk>
// (tapeformer gives one per character), and reads a byte that is not UTF-8 as U+FFFD. SentencePiece's
// BPE model ("llama") would be the usual choice, but a vocabulary without the 256 byte pieces makes its
// byte fallback throw inside llama.cpp on the first unknown character (node-llama-cpp tokenizes probe
// texts while loading: it crashed on a vocabulary of 30 characters), and the model's embedding has no
// rows to give those pieces. No BOS, EOS or space prefix is added (tapeformer adds none); the BOS and EOS
// ids are <unk>'s, an id that is never a training target, so llama.cpp does not end a continuation
// where tapeformer goes on.
#pragma once
#include "data/tokenizer.h"
#include "export/gguf.h"

namespace tf::exporting {

// Sets tokenizer.ggml.*; InputError for a tokenizer GGUF cannot express as tapeformer encodes.
void add_gguf_tokenizer(GgufFile& file, const data::Tokenizer& tokenizer);

}  // namespace tf::exporting

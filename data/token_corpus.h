// A corpus that came tokenized (data.corpus: tokens, docs/data.md): token files trained on as they
// are, with no text and no preparation. llm.c's files (magic 20240520, uint16 ids) and tapeformer's
// own shards both read; the tokenizer is an IdsTokenizer (ids_tokenizer.h) whose vocabulary covers
// every id in the files, or a checkpoint's when one is resumed, fine-tuned or evaluated.
//
// Without a validation file the last 10% of the training ids are held out. The files are mapped and
// scanned once for their largest id (a shard's header names its vocabulary, so it is not scanned).
// Ids stand for no known text, so evaluations report loss per token, not bits per character.
//
//   tf::data::TokenCorpusSpec spec{"tiny_shakespeare_train.bin", "tiny_shakespeare_val.bin", 50257};
//   tf::data::PreparedCorpus c = tf::data::open_token_corpus(spec);  // c.train.tokens, c.tokenizer
#pragma once
#include <string>
#include <vector>

#include "data/prepare.h"

namespace tf::data {

struct TokenCorpusSpec {
  std::string train_path;  // one token file
  std::string val_path;    // one token file, or "": the last 10% of train_path's ids
  int64_t vocab_size = 0;  // 0: one more than the largest id in the files
  std::vector<std::string> specials;  // after the vocabulary ([PAD] ... for BERT)
  const Tokenizer* given = nullptr;   // a checkpoint's tokenizer: every id must be below its vocabulary
  std::string train_key = "data.train_path", val_key = "data.val_path", vocab_key = "data.vocab_size";
};

PreparedCorpus open_token_corpus(const TokenCorpusSpec& spec);

}  // namespace tf::data

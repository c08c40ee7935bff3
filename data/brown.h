// Preparing the Brown corpus (Francis & Kucera 1961/1979): tagged raw files -> plain-text splits.
//
// The raw corpus (500 documents ca01..cr09, fetched by `scripts/setup.sh --corpus`) writes one
// sentence per line as space-separated `word/tag` tokens. prepare_brown strips the tags, rebuilds
// natural spacing and writes one sentence per line with a blank line between documents:
//
//   raw:  ``/`` Only/rb a/at handful/nn ''/'' ,/, the/at jury/nn said/vbd ?/. ?/.
//   text: "Only a handful", the jury said?
//
//   tf::data::BrownSplits s = tf::data::prepare_brown(root / "brown/raw", root / "brown");  // root: data/root.h
//   std::string train = tf::data::read_text(s.train);
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace tf::data {

struct BrownSplits {
  std::filesystem::path train, val;  // <out_dir>/train.txt, <out_dir>/val.txt
  int train_documents = 0, val_documents = 0;  // 450, 50 for the full corpus
  bool rebuilt = false;  // false when up-to-date outputs were kept
};

// Reads every raw document (files named c[a-r]NN) under raw_dir in sorted order and writes
// train.txt and val.txt under out_dir. The split is by document: the document at 0-based index i
// goes to validation when i % 10 == 9 (every 10th: ca10, ca20, ..., 50 of the 500), else to training.
// Idempotent: when both outputs exist and are newer than every raw file, nothing is written.
// Outputs are written to a temporary name and renamed, so an interrupted run leaves no stale file.
// Throws tf::InputError when raw_dir holds no raw documents (pointing to `scripts/setup.sh --corpus`).
BrownSplits prepare_brown(const std::filesystem::path& raw_dir, const std::filesystem::path& out_dir);

// One raw line of `word/tag` tokens -> one sentence of plain text (empty for a blank line):
//  - the tag is whatever follows the LAST '/' (words such as 1/2/cd keep their inner slash);
//  - a repeated punctuation token (`?/. ?/.`, a transcription artefact) is written once, and so is
//    a sentence-final period after an abbreviation (`Jr./np ./.` -> "Jr.");
//  - `` and '' become ", opening and closing; a single ' opens when it starts a quotation
//    (no single quote open and a word follows), else it closes;
//  - no space before , . ; : ? ! ) ] closing quotes and clitics ('s 'll n't ...);
//    no space after ( [ and opening quotes.
std::string brown_sentence(std::string_view raw_line);

}  // namespace tf::data

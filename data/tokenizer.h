// The tokenizer interface: text <-> token ids, special tokens, and a serialised form for checkpoints.
//
// Three tokenizers implement it: CharTokenizer (UTF-8 code points, char_tokenizer.h), BpeTokenizer
// (byte-level BPE, bpe_tokenizer.h) and IdsTokenizer (a corpus tokenized elsewhere: the ids
// themselves, ids_tokenizer.h). Special tokens ([PAD], [MASK], [CLS], [SEP] for BERT) take the
// ids after the learned vocabulary, in the order they were added. encode() never produces them from
// text (the string "[MASK]" in a text encodes as ordinary characters); batchers insert them by id,
// and decode() writes a special token as its name.
//
//   auto tok = tf::data::BpeTokenizer::train(text, 4096);
//   tok.add_special("[MASK]");
//   std::vector<int32_t> ids = tok.encode("The jury said.");
//   std::string s = tok.to_string();                        // store in the checkpoint
//   auto back = tf::data::Tokenizer::from_string(s);        // same ids, same specials
//
// Serialised form (format 1): UTF-8 text, one item per line, beginning with a header line
//   tapeformer-tokenizer <kind> 1          kind: char | bpe | ids
// followed by the kind's body (see char_tokenizer.h, bpe_tokenizer.h) and then
//   specials <n>
//   <name>                                 n lines in id order; names hold no whitespace
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tf::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string_view kind() const = 0;  // "char", "bpe" or "ids"
  int32_t vocab_size() const { return base_vocab_size() + static_cast<int32_t>(specials_.size()); }
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode_into(text, ids);
    return ids;
  }
  // encode() into `ids` (cleared first), reusing its memory: a corpus is encoded a chunk at a time.
  virtual void encode_into(std::string_view text, std::vector<int32_t>& ids) const = 0;
  // A place to cut `text` for encoding in pieces: the smallest p >= at, 0 < p < text.size(), with
  // encode(text) == encode(text[0, p)) + encode(text[p, end)); text.size() when there is none. A
  // corpus is encoded in chunks cut there, in parallel (data/prepare.h).
  virtual size_t split_point(std::string_view text, size_t at) const = 0;
  // Throws tf::Error naming the id when an id is outside [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  // Adds a special token after the current vocabulary and returns its id; a name already present
  // returns its existing id. Names must be non-empty and hold no whitespace.
  int32_t add_special(std::string_view name);
  bool has_special(std::string_view name) const;
  // The id of a special token; tf::InputError naming the known specials when absent.
  virtual int32_t id_of(std::string_view special) const;
  // Every id that is not text: the added specials (and <unk> for the char tokenizer), ascending.
  virtual std::vector<int32_t> special_ids() const;
  // How many of `ids` are the unknown token (<unk>: text outside a char vocabulary); 0 for a
  // tokenizer without one (byte-level BPE encodes every text).
  int64_t count_unknown(std::span<const int32_t> ids) const;

  virtual std::string to_string() const = 0;
  // Rebuilds any kind from to_string(); tf::InputError on a malformed form.
  static std::unique_ptr<Tokenizer> from_string(std::string_view serialised);

 protected:
  virtual int32_t base_vocab_size() const = 0;  // ids below this are learned tokens
  // A special token built into the vocabulary (the char tokenizer's "<unk>"), known to id_of.
  virtual bool is_builtin_special(std::string_view name) const { return false; }
  // The name of special id `id` (>= base_vocab_size()), for decode.
  const std::string& special_name(int32_t id) const { return specials_[id - base_vocab_size()]; }
  std::string specials_to_string() const;
  // Reads the "specials <n>" section from lines[at...]; advances `at`.
  void specials_from_lines(const std::vector<std::string_view>& lines, size_t& at);

 private:
  std::vector<std::string> specials_;
};

// Helpers for the serialised form.
namespace serial {
std::vector<std::string_view> split_lines(std::string_view text);
// Checks the header line and returns the body lines after it.
std::vector<std::string_view> body_lines(std::string_view text, std::string_view kind);
int64_t parse_int(std::string_view field, std::string_view what);
}  // namespace serial

}  // namespace tf::data

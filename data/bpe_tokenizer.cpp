// Byte-level BPE: pre-tokenisation, training with incremental pair counts, and encoding.
#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "data/unicode_classes.h"
#include "framework/error.h"

namespace tf::data {

namespace {

enum class ByteClass { space, letter, digit, other };

ByteClass class_of(unsigned char c) {
  if (c == ' ' || (c >= '\t' && c <= '\r')) return ByteClass::space;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return ByteClass::letter;
  if (c >= 0x80) return ByteClass::letter;  // UTF-8 lead and continuation bytes: keep letters whole
  if (c >= '0' && c <= '9') return ByteClass::digit;
  return ByteClass::other;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

// Note [pre-tokenisation], version gpt2-classes.

std::vector<std::string_view> pretokenize_gpt2_classes(std::string_view text) {
  static constexpr std::string_view contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  const auto cls = [&](size_t i) { return class_of(static_cast<unsigned char>(text[i])); };
  std::vector<std::string_view> chunks;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    size_t body = i;
    if (text[i] == ' ' && i + 1 < n && cls(i + 1) != ByteClass::space) {
      body = i + 1;  // a single space leads the word after it: " the"
    } else if (cls(i) == ByteClass::space) {
      size_t j = i;
      while (j < n && cls(j) == ByteClass::space) ++j;
      if (j < n && j - i >= 2 && text[j - 1] == ' ') --j;  // leave the last space to lead the next word
      chunks.push_back(text.substr(i, j - i));
      i = j;
      continue;
    }
    if (body == i && text[i] == '\'') {
      const auto it = std::find_if(std::begin(contractions), std::end(contractions),
                                   [&](std::string_view c) { return text.substr(i).starts_with(c); });
      if (it != std::end(contractions)) {
        chunks.push_back(text.substr(i, it->size()));
        i += it->size();
        continue;
      }
    }
    const ByteClass k = cls(body);
    size_t j = body + 1;
    while (j < n && cls(j) == k) ++j;
    chunks.push_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

std::vector<std::string_view> pretokenize_gpt2(std::string_view text) {
  // GPT-2's expression, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+, matched
  // by hand over code points: the first alternative that matches at a position wins, each greedy.
  std::vector<size_t> start;  // code point k spans bytes [start[k], start[k + 1])
  std::vector<CodePointClass> cls;
  start.reserve(text.size() + 1);
  cls.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const DecodedCodePoint d = decode_utf8_at(text, at);
    start.push_back(at);
    cls.push_back(code_point_class(d.cp));
    at += d.length;
  }
  const size_t m = cls.size();
  start.push_back(text.size());
  const auto is = [&](size_t k, CodePointClass c) { return k < m && cls[k] == c; };
  const auto ascii = [&](size_t k) { return k < m && start[k + 1] - start[k] == 1 ? text[start[k]] : '\0'; };
  std::vector<std::string_view> chunks;
  const auto emit = [&](size_t k, size_t end) { chunks.push_back(text.substr(start[k], start[end] - start[k])); };
  for (size_t k = 0; k < m;) {
    if (ascii(k) == '\'') {
      const char a = ascii(k + 1), b = ascii(k + 2);
      const size_t length = (a == 's' || a == 't' || a == 'm' || a == 'd') ? 2
                            : ((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
      if (length > 0) {
        emit(k, k + length);
        k += length;
        continue;
      }
    }
    const size_t body = ascii(k) == ' ' && k + 1 < m && cls[k + 1] != CodePointClass::white_space ? k + 1 : k;
    if (cls[body] != CodePointClass::white_space) {  // " ?" then a run of letters, numbers or other
      size_t end = body + 1;
      while (is(end, cls[body])) ++end;
      emit(k, end);
      k = end;
      continue;
    }
    size_t end = k + 1;
    while (is(end, CodePointClass::white_space)) ++end;
    if (end - k > 1 && end < m) --end;  // \s+(?!\S): the last one stays with what follows
    emit(k, end);
    k = end;
  }
  return chunks;
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text, Pretokenizer kind) {
  return kind == Pretokenizer::gpt2 ? pretokenize_gpt2(text) : pretokenize_gpt2_classes(text);
}

std::string_view pretokenizer_name(Pretokenizer kind) {
  return kind == Pretokenizer::gpt2 ? "gpt2" : "gpt2-classes";
}

size_t BpeTokenizer::split_point(std::string_view text, size_t at) const {
  const auto space = [&](size_t i) { return class_of(static_cast<unsigned char>(text[i])) == ByteClass::space; };
  for (size_t p = std::max<size_t>(at, 1); p + 1 < text.size(); ++p) {
    if (text[p] != ' ') continue;
    if (pretokenizer_ == Pretokenizer::gpt2_classes) {
      if (!space(p - 1) && !space(p + 1)) return p;
      continue;
    }
    // gpt2: whatever precedes, a space before a non-space starts a chunk. The code point after it
    // must lie wholly inside the text (4 bytes at most), or its class could change with more text.
    if (static_cast<unsigned char>(text[p + 1]) < 0x80 ? !space(p + 1)
        : p + 5 <= text.size() && code_point_class(decode_utf8_at(text, p + 1).cp) != CodePointClass::white_space)
      return p;
  }
  return text.size();
}

BpeTokenizer::BpeTokenizer(std::vector<Merge> merges, Pretokenizer pretokenizer)
    : merges_(std::move(merges)), pretokenizer_(pretokenizer) {
  token_bytes_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) token_bytes_.emplace_back(1, static_cast<char>(b));
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto [left, right] = merges_[r];
    const int32_t id = 256 + static_cast<int32_t>(r);
    TF_CHECK_INPUT(left >= 0 && left < id && right >= 0 && right < id, "BpeTokenizer: merge ", r, " (", left, ", ",
                   right, ") uses an id not defined before it (< ", id, ")");
    TF_CHECK_INPUT(rank_.emplace(pair_key(left, right), static_cast<int32_t>(r)).second, "BpeTokenizer: merge ", r,
                   " (", left, ", ", right, ") repeats an earlier merge");
    TF_CHECK_INPUT(token_bytes_[left].size() + token_bytes_[right].size() <= kMaxTokenBytes, "BpeTokenizer: merge ",
                   r, " (", left, ", ", right, ") makes a token of ", token_bytes_[left].size() + token_bytes_[right].size(),
                   " bytes, above the limit of ", kMaxTokenBytes);
    token_bytes_.push_back(token_bytes_[left] + token_bytes_[right]);
  }
}

BpeTokenizer BpeTokenizer::train(std::string_view text, int32_t vocab_size, const std::vector<std::string>& specials) {
  const int64_t target_merges = static_cast<int64_t>(vocab_size) - 256 - static_cast<int64_t>(specials.size());
  TF_CHECK_INPUT(target_merges >= 0, "BpeTokenizer::train: vocab_size ", vocab_size, " is below the 256 bytes + ",
                 specials.size(), " specials it must hold");

  // Unique words (chunks) with their frequencies, indexed in sorted order so every container below
  // is filled deterministically.
  std::unordered_map<std::string_view, int64_t> word_counts;
  for (std::string_view chunk : pretokenize(text, Pretokenizer::gpt2)) ++word_counts[chunk];
  std::vector<std::pair<std::string_view, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());  // word -> its current symbols
  std::vector<int64_t> freq(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    for (char c : sorted[w].first) words[w].push_back(static_cast<unsigned char>(c));
    freq[w] = sorted[w].second;
  }

  // Pair statistics: total count, and the words where each pair was created (may hold stale or
  // repeated entries; a visit checks the word).
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t key = pair_key(words[w][i], words[w][i + 1]);
      pair_count[key] += freq[w];
      pair_words[key].push_back(static_cast<int32_t>(w));
    }

  // Max-heap of (count, key) with lazy deletion: an entry is live while its count is the pair's
  // current count. Equal counts pop the smaller key first: the deterministic tie-break.
  struct Entry {
    int64_t count;
    uint64_t key;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : key > o.key; }
  };
  std::priority_queue<Entry> heap;
  for (const auto& [key, count] : pair_count) heap.push({count, key});

  std::vector<Merge> merges;
  std::vector<std::string> token_bytes;  // id -> its bytes
  for (int b = 0; b < 256; ++b) token_bytes.emplace_back(1, static_cast<char>(b));
  std::unordered_set<std::string> known_tokens(token_bytes.begin(), token_bytes.end());
  std::vector<int64_t> last_visit(words.size(), -1);
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<int32_t> merged;
  while (static_cast<int64_t>(merges.size()) < target_merges && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const auto live = pair_count.find(top.key);
    if (live == pair_count.end() || live->second != top.count) continue;  // stale entry
    if (top.count < 2) break;  // merging a pair seen once learns nothing
    const int32_t left = static_cast<int32_t>(top.key >> 32), right = static_cast<int32_t>(top.key & 0xFFFFFFFFu);
    // Never learned (see kMaxTokenBytes and train): too long, or the bytes of a token already known.
    if (token_bytes[left].size() + token_bytes[right].size() > kMaxTokenBytes ||
        !known_tokens.insert(token_bytes[left] + token_bytes[right]).second) {
      pair_count.erase(live);  // its heap entries go stale; a count rebuilt later is skipped here again
      pair_words.erase(top.key);
      continue;
    }
    const int32_t new_id = 256 + static_cast<int32_t>(merges.size());
    merges.emplace_back(left, right);
    token_bytes.push_back(token_bytes[left] + token_bytes[right]);

    // Rewrite each word holding the pair; count every pair it loses (-freq) and gains (+freq).
    delta.clear();
    const std::vector<int32_t> holders = std::move(pair_words[top.key]);
    pair_words.erase(top.key);
    for (const int32_t w : holders) {
      if (last_visit[w] == new_id) continue;
      last_visit[w] = new_id;
      std::vector<int32_t>& symbols = words[w];
      merged.clear();
      for (size_t i = 0; i < symbols.size();) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(new_id);  // left to right, non-overlapping: "a a a" -> "aa a"
          i += 2;
        } else {
          merged.push_back(symbols[i++]);
        }
      }
      if (merged.size() == symbols.size()) continue;  // a stale holder
      for (size_t i = 0; i + 1 < symbols.size(); ++i) delta[pair_key(symbols[i], symbols[i + 1])] -= freq[w];
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t key = pair_key(merged[i], merged[i + 1]);
        delta[key] += freq[w];
        // Only pairs touching the new token are new to this word; the others already list it.
        if (merged[i] == new_id || merged[i + 1] == new_id) pair_words[key].push_back(w);
      }
      symbols.swap(merged);
    }
    for (const auto& [key, change] : delta) {
      if (change == 0) continue;
      const int64_t count = pair_count[key] += change;
      if (count <= 0) pair_count.erase(key);
      else heap.push({count, key});
    }
  }

  BpeTokenizer tok(std::move(merges));
  for (const auto& s : specials) tok.add_special(s);
  return tok;
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  // Apply merges in rank order, each left to right: this reproduces training's rewriting. A merge
  // only creates pairs containing its new token, whose ranks are higher, so a min-heap over
  // (rank, position) visits merges in exactly that order in O(n log n).
  const int32_t n = static_cast<int32_t>(chunk.size());
  std::vector<int32_t> symbol(n), next(n), prev(n);  // a linked list over positions; symbol -1 = removed
  for (int32_t i = 0; i < n; ++i) {
    symbol[i] = static_cast<unsigned char>(chunk[i]);
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  struct Candidate {
    int32_t rank, pos, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto consider = [&](int32_t pos, int32_t right) {
    if (pos < 0 || right >= n) return;
    const auto it = rank_.find(pair_key(symbol[pos], symbol[right]));
    if (it != rank_.end()) heap.push({it->second, pos, right});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (symbol[c.pos] < 0 || symbol[c.right] < 0 || next[c.pos] != c.right) continue;
    if (merges_[c.rank] != Merge{symbol[c.pos], symbol[c.right]}) continue;  // the pair changed since
    symbol[c.pos] = 256 + c.rank;
    symbol[c.right] = -1;
    next[c.pos] = next[c.right];
    if (next[c.pos] < n) prev[next[c.pos]] = c.pos;
    consider(prev[c.pos], c.pos);
    consider(c.pos, next[c.pos]);
  }
  for (int32_t i = 0; i < n; i = next[i]) out.push_back(symbol[i]);  // position 0 is never removed
}

void BpeTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  ids.clear();
  ids.reserve(text.size() / 3);
  // Natural text repeats its words: encode each distinct chunk once. (Local, so encode is const
  // and safe to call from several threads.)
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;  // chunk -> (offset, count) in ids
  for (std::string_view chunk : pretokenize(text, pretokenizer_)) {
    const auto it = seen.find(chunk);
    if (it != seen.end()) {
      const auto [offset, count] = it->second;
      for (size_t k = 0; k < count; ++k) ids.push_back(ids[offset + k]);
      continue;
    }
    const size_t offset = ids.size();
    encode_chunk(chunk, ids);
    seen.emplace(chunk, std::pair{offset, ids.size() - offset});
  }
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (const int32_t id : ids) {
    TF_CHECK(id >= 0 && id < vocab_size(), "BpeTokenizer::decode: id ", id, " outside [0, ", vocab_size(), ")");
    out += id < base_vocab_size() ? token_bytes_[id] : special_name(id);
  }
  return out;
}

std::string BpeTokenizer::to_string() const {
  std::string out = "tapeformer-tokenizer bpe 1\npretokenizer " + std::string(pretokenizer_name(pretokenizer_)) +
                    "\nmerges " + std::to_string(merges_.size()) + "\n";
  for (const auto& [left, right] : merges_) out += std::to_string(left) + " " + std::to_string(right) + "\n";
  return out + specials_to_string();
}

BpeTokenizer BpeTokenizer::from_string(std::string_view serialised) {
  const std::vector<std::string_view> lines = serial::body_lines(serialised, "bpe");
  TF_CHECK_INPUT(lines.size() >= 2 && lines[0].starts_with("pretokenizer ") && lines[1].starts_with("merges "),
                 "BpeTokenizer: serialised form lacks 'pretokenizer <name>' and 'merges <m>' lines");
  const std::string_view name = lines[0].substr(13);
  TF_CHECK_INPUT(name == "gpt2" || name == "gpt2-classes", "BpeTokenizer: unknown pre-tokenizer '", name,
                 "' (known: gpt2, gpt2-classes)");
  const Pretokenizer pretokenizer = name == "gpt2" ? Pretokenizer::gpt2 : Pretokenizer::gpt2_classes;
  const int64_t m = serial::parse_int(lines[1].substr(7), "merge count");
  TF_CHECK_INPUT(m >= 0 && static_cast<size_t>(m) + 2 <= lines.size(), "BpeTokenizer: serialised form lists ", m,
                 " merges but has ", lines.size() - 2, " lines left");
  std::vector<Merge> merges;
  merges.reserve(m);
  for (int64_t r = 0; r < m; ++r) {
    const std::string_view line = lines[2 + r];
    const size_t space = line.find(' ');
    TF_CHECK_INPUT(space != std::string_view::npos, "BpeTokenizer: bad merge line '", line, "'");
    const int64_t left = serial::parse_int(line.substr(0, space), "merge id");
    const int64_t right = serial::parse_int(line.substr(space + 1), "merge id");
    TF_CHECK_INPUT(left >= 0 && right >= 0 && left < 256 + r && right < 256 + r, "BpeTokenizer: merge ", r, " (",
                   left, ", ", right, ") uses an id not defined before it (< ", 256 + r, ")");
    merges.emplace_back(static_cast<int32_t>(left), static_cast<int32_t>(right));
  }
  BpeTokenizer tok(std::move(merges), pretokenizer);
  size_t at = static_cast<size_t>(m) + 2;
  tok.specials_from_lines(lines, at);
  return tok;
}

}  // namespace tf::data

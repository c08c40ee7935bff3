// Preparing a corpus into token shards (prepare.h): the split, the tokenizer, the parallel encoding.
#include "data/prepare.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>

#include "data/bpe_tokenizer.h"
#include "data/chunk_pipeline.h"
#include "data/char_tokenizer.h"
#include "data/hash.h"
#include "data/sources.h"
#include "data/text.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace tf::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kEveryTenthFrom = 10;  // files from which every tenth is held out (prepare.h)

std::string megabytes(uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return s;
}

uint64_t total_bytes(const std::vector<SourceFile>& files) {
  uint64_t n = 0;
  for (const SourceFile& f : files) n += std::min(f.end, f.size) - std::min(f.begin, f.size);
  return n;
}

struct Split {
  std::vector<SourceFile> train, val;
  std::string rule;  // for the description
};

// Where the held-out last 10% begins, as (file index, offset in that file): just after the first line
// break at or after joined offset `mark` of `files` joined with '\n' (the joining '\n' counts). With
// none before the text's end, at the mark itself, moved past any UTF-8 continuation bytes.
std::pair<size_t, uint64_t> held_out_cut(const std::vector<SourceFile>& files, uint64_t mark) {
  uint64_t start = 0;  // joined offset of file i
  size_t i = 0;
  while (i + 1 < files.size() && mark > start + files[i].size) start += files[i++].size + 1;
  const SourceFile& f = files[i];
  const uint64_t local = std::min(mark - start, f.size);
  std::ifstream in(f.path, std::ios::binary);
  TF_CHECK_INPUT(in, "'", f.path, "': cannot open: ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(local));
  std::string block(1 << 16, '\0');
  uint64_t at = local;
  bool first = true;
  size_t skip = 0;  // continuation bytes at the mark
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const std::string_view got(block.data(), static_cast<size_t>(in.gcount()));
    if (first)
      while (skip < got.size() && (static_cast<unsigned char>(got[skip]) & 0xC0) == 0x80) ++skip;
    first = false;
    if (const size_t nl = got.find('\n'); nl != std::string_view::npos) {
      const uint64_t cut = at + nl + 1;
      if (cut < f.size) return {i, cut};
      break;
    }
    at += got.size();
  }
  if (i + 1 < files.size()) return {i + 1, 0};
  return {i, local + skip};
}

Split split_files(std::vector<SourceFile> train, std::vector<SourceFile> val) {
  Split s;
  if (!val.empty()) {
    s.train = std::move(train);
    s.val = std::move(val);
    s.rule = "validation: " + std::to_string(s.val.size()) + (s.val.size() == 1 ? " file" : " files") + " (" +
             megabytes(total_bytes(s.val)) + ")";
    return s;
  }
  if (train.size() >= kEveryTenthFrom) {
    for (size_t i = 0; i < train.size(); ++i) (i % 10 == 9 ? s.val : s.train).push_back(train[i]);
    s.rule = "validation: every tenth file (" + std::to_string(s.val.size()) + " files, " +
             megabytes(total_bytes(s.val)) + ")";
    return s;
  }
  uint64_t joined = 0;
  for (const SourceFile& f : train) joined += f.size;
  joined += train.size() - 1;
  const auto [file, offset] = held_out_cut(train, joined - joined / 10);
  // The cut lies at a line break when one follows the 90% mark; at the text's very end there is no
  // validation text, and check_token_counts (train) says so.
  for (size_t i = 0; i < train.size(); ++i) {
    if (i < file) s.train.push_back(train[i]);
    if (i > file) s.val.push_back(train[i]);
  }
  SourceFile head = train[file], tail = train[file];
  head.end = offset;
  tail.begin = offset;
  if (offset > 0 || file == 0) s.train.push_back(head);
  s.val.insert(s.val.begin(), tail);
  s.rule = "the last 10% held out for validation";
  return s;
}

// Progress of one pass: a line rewritten in place on a terminal, else a line every ~10 seconds.
class Progress {
 public:
  Progress(std::ostream* out, std::string what, uint64_t total)
      : out_(out), what_(std::move(what)), total_(total), tty_(::isatty(STDOUT_FILENO) && out == &std::cout) {}
  void update(uint64_t done, bool last = false) {
    if (!out_) return;
    const double elapsed = seconds_since(start_);
    if (!last && elapsed - shown_ < (tty_ ? 0.25 : 10.0)) return;
    shown_ = elapsed;
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    char line[160];
    std::snprintf(line, sizeof line, "%s: %s of %s, %.0f MB/s", what_.c_str(), megabytes(done).c_str(),
                  megabytes(total_).c_str(), rate / 1e6);
    std::string text = line;
    if (!last && rate > 0) text += ", " + std::to_string(static_cast<int64_t>((total_ - done) / rate)) + " s left";
    if (last) {
      std::snprintf(line, sizeof line, ", %.1f s", elapsed);
      text += line;
    }
    *out_ << (tty_ ? "\r\033[K" : "") << text << (tty_ && !last ? "" : "\n") << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  std::ostream* out_;
  std::string what_;
  uint64_t total_;
  bool tty_;
  Clock::time_point start_ = Clock::now();
  double shown_ = 0;
};

// The tokenizer a fresh corpus trains: char over every code point of the training split; bpe over at
// most sample_bytes of it, taken as the same share of every chunk so that the sample spans the corpus.
std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<SourceFile>& train, const TokenizerSpec& spec,
                                           const PrepareOptions& options, size_t chunk_bytes, uint64_t& sample_bytes) {
  const uint64_t total = total_bytes(train);
  Progress progress(options.progress, "learning the " + spec.kind + " vocabulary", total);
  const auto any_point = [](std::string_view text, size_t at) {
    for (size_t p = std::max<size_t>(at, 1); p < text.size(); ++p)
      if ((static_cast<unsigned char>(text[p]) & 0xC0) != 0x80) return p;
    return text.size();
  };
  TextStream stream(train, chunk_bytes, any_point);
  const size_t workers = static_cast<size_t>(omp_get_max_threads());
  uint64_t taken = 0;  // bytes (the taker's count: the reader's runs ahead on another thread)
  std::unique_ptr<Tokenizer> tokenizer;
  if (spec.kind == "char") {
    std::vector<char32_t> all;
    using Found = std::pair<size_t, std::vector<char32_t>>;  // (first invalid byte, code points)
    for_each_chunk<Found>(
        stream, workers,
        [&](TextStream::Chunk& c, Found& found) {
          found = {first_invalid_utf8(c.text), CharTokenizer::distinct_code_points(c.text)};
        },
        [&](const TextStream::Chunk& c, const Found& found) {
          stream.check_utf8(c, found.first);
          all.insert(all.end(), found.second.begin(), found.second.end());
          std::sort(all.begin(), all.end());
          all.erase(std::unique(all.begin(), all.end()), all.end());
          if (c.file_end && train.size() > 1) all.push_back(U'\n');  // the joining line break
          progress.update(taken += c.text.size());
        });
    tokenizer = std::make_unique<CharTokenizer>(std::move(all));
  } else {
    const double share = total <= spec.sample_bytes ? 1.0 : static_cast<double>(spec.sample_bytes) / total;
    std::string sample;
    for_each_chunk<size_t>(
        stream, workers, [](TextStream::Chunk& c, size_t& bad) { bad = first_invalid_utf8(c.text); },
        [&](const TextStream::Chunk& c, size_t bad) {
          stream.check_utf8(c, bad);
          size_t take = c.text.size();
          if (share < 1.0) {  // a share of this chunk, ending at a line break (else a space) when there is one
            take = static_cast<size_t>(share * static_cast<double>(c.text.size()));
            size_t end = c.text.rfind('\n', take);
            if (end == std::string::npos || end == 0) end = c.text.rfind(' ', take);
            take = end == std::string::npos ? take : end + 1;
          }
          sample.append(c.text, 0, take);
          if (c.file_end && take == c.text.size() && c.file + 1 < train.size()) sample += '\n';
          progress.update(taken += c.text.size());
        });
    sample_bytes = sample.size();
    tokenizer = std::make_unique<BpeTokenizer>(
        BpeTokenizer::train(sample, static_cast<int32_t>(spec.bpe_vocab_size), spec.specials));
  }
  progress.update(total, true);
  for (const std::string& special : spec.specials) tokenizer->add_special(special);
  return tokenizer;
}

struct Encoded {
  std::vector<int32_t> ids;
  std::vector<char> packed;       // the ids as the shard stores them (TokenFileWriter::pack)
  std::exception_ptr pack_error;  // raised in order, by the taker
  uint64_t characters = 0, unknown = 0;
  size_t bytes = 0;                 // of the file's text (without a joining line break)
  size_t bad = std::string::npos;  // the chunk's first invalid UTF-8 byte
};

// Encodes `pieces` (documents joined with '\n') into `writer`, or only counts the ids without one.
int64_t encode_split(const std::vector<SourceFile>& pieces, const Tokenizer& tokenizer, TokenFileWriter* writer,
                     uint64_t& characters, uint64_t& unknown, size_t chunk_bytes, Progress& progress) {
  TextStream stream(pieces, chunk_bytes,
                    [&](std::string_view text, size_t at) { return tokenizer.split_point(text, at); });
  int64_t count = 0;
  uint64_t taken = 0;  // bytes of text (the reader's count runs ahead on another thread)
  for_each_chunk<Encoded>(
      stream, static_cast<size_t>(omp_get_max_threads()),
      [&](TextStream::Chunk& c, Encoded& e) {
        e.bytes = c.text.size();
        if (c.file_end && c.file + 1 < pieces.size()) c.text += '\n';  // the line break joining documents
        tokenizer.encode_into(c.text, e.ids);
        e.bad = first_invalid_utf8(c.text);
        e.unknown = static_cast<uint64_t>(tokenizer.count_unknown(e.ids));
        e.pack_error = nullptr;
        if (writer) {
          try {
            writer->pack(e.ids, e.packed);
          } catch (...) {
            e.pack_error = std::current_exception();
          }
        }
        e.characters = 0;
        for (const char b : c.text) e.characters += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
      },
      [&](const TextStream::Chunk& c, const Encoded& e) {
        stream.check_utf8(c, e.bad);
        if (e.pack_error) std::rethrow_exception(e.pack_error);
        if (writer) {
          if (c.file_start) writer->start_document();
          writer->append_packed(e.packed);
        }
        count += static_cast<int64_t>(e.ids.size());
        characters += e.characters;
        unknown += e.unknown;
        progress.update(taken += e.bytes);
      });
  return count;
}

std::string hex16(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// sources.tsv: one line per file, "<size>\t<mtime ns>\t<path>", training files then validation files.
std::string listing_text(const std::vector<SourceFile>& files) {
  std::string text;
  for (const SourceFile& f : files)
    text += std::to_string(f.size) + "\t" + std::to_string(f.mtime_ns) + "\t" + f.path + "\n";
  return text;
}

// What differs between the listing of an earlier preparation and today's, for the message.
std::string listing_change(const fs::path& earlier_file, const std::vector<SourceFile>& now) {
  std::ifstream in(earlier_file);
  std::string line;
  std::vector<std::string> earlier;
  while (std::getline(in, line)) earlier.push_back(line + "\n");
  const std::string current = listing_text(now);
  size_t i = 0, at = 0;
  for (; i < earlier.size(); ++i) {
    const size_t end = current.find('\n', at);
    if (end == std::string::npos) return "a file was removed since the shards were made";
    const std::string line_now = current.substr(at, end + 1 - at);
    if (line_now != earlier[i]) {
      const std::string path = line_now.substr(line_now.rfind('\t') + 1, line_now.size() - line_now.rfind('\t') - 2);
      return "'" + path + "' changed since the shards were made (or a file before it was added or removed)";
    }
    at = end + 1;
  }
  return at < current.size() ? "a file was added since the shards were made" : "the shards' tokenizer differs";
}


}  // namespace

PreparedCorpus prepare_corpus(const CorpusSpec& corpus, const TokenizerSpec& spec, const PrepareOptions& options) {
  std::vector<SourceFile> train = resolve_sources(corpus.train_paths, corpus.train_key);
  std::vector<SourceFile> val =
      corpus.val_paths.empty() ? std::vector<SourceFile>{} : resolve_sources(corpus.val_paths, corpus.val_key);
  std::vector<SourceFile> listed = train;  // every file, the empty ones too: one may not stay empty
  listed.insert(listed.end(), val.begin(), val.end());
  const uint64_t source_fingerprint = fnv1a64(std::to_string(train.size()), listing_fingerprint(listed));
  // Empty files hold no document; a corpus of nothing else is an error.
  const auto drop_empty = [](std::vector<SourceFile>& files) {
    const size_t before = files.size();
    std::erase_if(files, [](const SourceFile& f) { return f.size == 0; });
    return before - files.size();
  };
  const size_t empty = drop_empty(train) + drop_empty(val);
  const auto named = [](const std::vector<std::string>& paths) {
    std::string s;
    for (const auto& p : paths) s += (s.empty() ? "'" : ", '") + p + "'";
    return s;
  };
  TF_CHECK_INPUT(!train.empty(), corpus.train_key, " ", named(corpus.train_paths),
                 ": the training text is empty (every file of it has 0 bytes)");
  TF_CHECK_INPUT(corpus.val_paths.empty() || !val.empty(), corpus.val_key, " ", named(corpus.val_paths),
                 ": the validation text is empty (every file of it has 0 bytes)");

  // The folder is named by what was asked for (the paths and the tokenizer), not by the files' state:
  // an edited corpus is prepared again in the same place.
  std::string asked = "train";
  for (const auto& p : corpus.train_paths) asked += "\t" + fs::absolute(p).lexically_normal().string();
  asked += "\nval";
  for (const auto& p : corpus.val_paths) asked += "\t" + fs::absolute(p).lexically_normal().string();
  asked += "\n" + spec.kind;
  if (spec.kind == "bpe")
    asked += " " + std::to_string(spec.bpe_vocab_size) + " sample " + std::to_string(spec.sample_bytes) +
             " pretokenizer " + std::string(pretokenizer_name(Pretokenizer::gpt2));  // new versions train anew
  for (const auto& special : spec.specials) asked += " " + special;
  PreparedCorpus result;
  result.folder = options.cache_dir / hex16(fnv1a64(asked));
  // A given tokenizer (a checkpoint's) uses the shards of the run that trained it when they were made
  // by it (a resume, an evaluation); else shards of its own.
  if (spec.given) {
    std::ifstream in(result.folder / "tokenizer.txt", std::ios::binary);
    const std::string made_by((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (made_by != spec.given->to_string())
      result.folder = options.cache_dir / hex16(fnv1a64(asked + "\ngiven\n" + spec.given->to_string()));
  }

  const Split split = split_files(train, val);
  const uint64_t train_bytes = total_bytes(split.train), val_bytes = total_bytes(split.val);
  result.description = std::to_string(listed.size()) + (listed.size() == 1 ? " file (" : " files (") +
                       megabytes(train_bytes + val_bytes) + "), " + split.rule +
                       (empty ? ", " + std::to_string(empty) + " empty files skipped" : "");

  // A warm start: the shards are there, made from these files by this tokenizer. Anything else about
  // them (stale, damaged, half written) means preparing again: they are made from the text alone.
  const fs::path train_file = result.folder / "train.tokens", val_file = result.folder / "val.tokens",
                 tokenizer_file = result.folder / "tokenizer.txt", listing_file = result.folder / "sources.tsv";
  std::error_code ec;
  if (fs::exists(listing_file, ec)) {
    std::string why;
    try {
      std::ifstream in(tokenizer_file, std::ios::binary);
      const std::string serialised((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      result.tokenizer = Tokenizer::from_string(serialised);
      const uint64_t tokenizer_fingerprint = fnv1a64(serialised);
      result.train = open_token_file(train_file);
      result.val = open_token_file(val_file);
      for (const TokenFile* f : {&result.train, &result.val})
        if (f->info.source_fingerprint != source_fingerprint || f->info.tokenizer_fingerprint != tokenizer_fingerprint)
          why = listing_change(listing_file, listed);
    } catch (const InputError& e) {
      why = e.what();
    }
    if (why.empty()) {
      result.reused = true;
      result.train_count = result.train.tokens.size();
      result.val_count = result.val.tokens.size();
      return result;
    }
    if (options.progress)
      *options.progress << "corpus: " << why << " (the shards in " << result.folder.string()
                        << "): preparing them again\n";
    result.tokenizer.reset();
    result.train = {};
    result.val = {};
  }

  const int threads = std::max(1, omp_get_max_threads());
  // A few chunks per thread in flight: memory stays near 64 MB of text and its ids, whatever the corpus.
  const size_t chunk_bytes = std::min(options.chunk_bytes, std::max<size_t>((64u << 20) / threads, 256u << 10));
  result.tokenizer = spec.given ? Tokenizer::from_string(spec.given->to_string())
                                : train_tokenizer(split.train, spec, options, chunk_bytes, result.sample_bytes);
  const std::string serialised = result.tokenizer->to_string();
  TokenFileInfo info;
  info.width = token_width(result.tokenizer->vocab_size());
  info.tokenizer_fingerprint = fnv1a64(serialised);
  info.source_fingerprint = source_fingerprint;
  info.vocab_size = static_cast<uint64_t>(result.tokenizer->vocab_size());
  if (options.write) {
    fs::create_directories(result.folder, ec);
    TF_CHECK_INPUT(!ec, "data.cache_dir: cannot create '", result.folder.string(), "': ", ec.message());
    fs::remove(listing_file, ec);  // the shards below are not current until the listing is back
  }
  for (const bool is_train : {true, false}) {
    const auto& pieces = is_train ? split.train : split.val;
    Progress progress(options.progress, is_train ? "encoding the training text" : "encoding the validation text",
                      is_train ? train_bytes : val_bytes);
    std::optional<TokenFileWriter> writer;
    if (options.write) writer.emplace(is_train ? train_file : val_file, info);
    uint64_t characters = 0, unknown = 0;
    const int64_t count = pieces.empty() ? 0
                                         : encode_split(pieces, *result.tokenizer, writer ? &*writer : nullptr,
                                                        characters, unknown, chunk_bytes, progress);
    progress.update(is_train ? train_bytes : val_bytes, true);
    (is_train ? result.train_count : result.val_count) = count;
    (is_train ? result.train : result.val).info = info;
    (is_train ? result.train : result.val).info.characters = characters;
    (is_train ? result.train : result.val).info.unknown = unknown;
    if (writer) {
      writer->set_counts(characters, unknown);
      writer->finish();
    }
  }
  if (!options.write) return result;
  write_file_atomically(tokenizer_file, serialised);
  write_file_atomically(listing_file, listing_text(listed));  // last: its presence marks the shards complete
  result.train = open_token_file(train_file);
  result.val = open_token_file(val_file);
  return result;
}

}  // namespace tf::data

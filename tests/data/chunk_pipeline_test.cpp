// for_each_chunk (data/chunk_pipeline.h): every chunk is worked on once and taken in order, for any
// number of workers and chunks; the first error in chunk order is the one raised, whether it comes
// from taking a chunk or from reading a later one, and nothing is taken after it.
#include "data/chunk_pipeline.h"

#include <gtest/gtest.h>

#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::TempDir;
using tf::testing::write_file;

// Cut anywhere (the tests' texts are ASCII).
size_t anywhere(std::string_view text, size_t at) { return std::max<size_t>(at, 1) < text.size() ? std::max<size_t>(at, 1) : text.size(); }

struct Seen {
  std::string text;  // the work's copy of its chunk
  size_t file = 0;
};

TEST(ChunkPipeline, EveryChunkIsWorkedOnOnceAndTakenInOrder) {
  TempDir dir;
  std::string expected;
  std::vector<std::string> paths;
  for (int f = 0; f < 7; ++f) {
    std::string text;
    for (int i = 0; i < 1000 * (f + 1) + 3 * f; ++i) text += static_cast<char>('a' + (i * 7 + f) % 26);
    static const char* const kNames[] = {"f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt", "f6.txt"};
    const std::filesystem::path file = dir / kNames[f];
    write_file(file, text);
    paths.push_back(file.string());
    expected += text;
  }
  for (const size_t workers : {1, 2, 3, 8}) {
    for (const size_t chunk_bytes : {1, 17, 63, 1000, 1 << 20}) {
      TextStream stream(resolve_sources(paths, "test"), chunk_bytes, anywhere);
      std::string joined;
      size_t chunks = 0, last_file = 0;
      for_each_chunk<Seen>(
          stream, workers, [](TextStream::Chunk& c, Seen& s) { s = {c.text, c.file}; },
          [&](const TextStream::Chunk& c, const Seen& s) {
            EXPECT_EQ(s.text, c.text);
            EXPECT_GE(c.file, last_file);
            last_file = c.file;
            joined += c.text;
            ++chunks;
          });
      EXPECT_EQ(joined, expected) << workers << " workers, chunks of " << chunk_bytes;
      if (chunk_bytes == 17) {
        EXPECT_GT(chunks, expected.size() / 17);
      }
    }
  }
}

TEST(ChunkPipeline, TheFirstErrorInChunkOrderIsRaisedAndNothingIsTakenAfterIt) {
  TempDir dir;
  write_file(dir / "a.txt", std::string(5000, 'a'));
  write_file(dir / "b.txt", std::string(5000, 'b'));
  const std::vector<std::string> paths = {(dir / "a.txt").string(), (dir / "b.txt").string()};
  size_t chunks_of_a = 0, bad_chunk = 0;  // a.txt's chunks, and the index of the first at offset >= 4000
  {
    TextStream stream(resolve_sources({paths[0]}, "test"), 100, anywhere);
    while (auto c = stream.next()) {
      if (c->offset < 4000) bad_chunk = chunks_of_a + 1;
      ++chunks_of_a;
    }
  }
  for (const size_t workers : {1, 2, 4}) {
    // take fails at the 3rd chunk: that error, and no chunk taken after it.
    {
      TextStream stream(resolve_sources(paths, "test"), 100, anywhere);
      size_t taken = 0;
      const std::string message = tf::testing::error_message<InputError>([&] {
        for_each_chunk<int>(stream, workers, [](TextStream::Chunk&, int&) {}, [&](const TextStream::Chunk&, const int&) {
          TF_CHECK_INPUT(++taken != 3, "chunk 3 is bad");
        });
      });
      EXPECT_EQ(message, "chunk 3 is bad");
      EXPECT_EQ(taken, 3u);
    }
    // b.txt vanishes after listing: reading it fails, but a take error in a.txt's chunks comes first...
    const std::vector<SourceFile> listed = resolve_sources(paths, "test");
    std::filesystem::rename(dir / "b.txt", dir / "b.moved");
    {
      TextStream stream(listed, 100, anywhere);
      size_t taken = 0;
      const std::string message = tf::testing::error_message<InputError>([&] {
        for_each_chunk<int>(stream, workers, [](TextStream::Chunk&, int&) {}, [&](const TextStream::Chunk& c, const int&) {
          ++taken;
          TF_CHECK_INPUT(c.offset < 4000, "a.txt is bad at ", c.offset);
        });
      });
      EXPECT_EQ(message.rfind("a.txt is bad at ", 0), 0u) << message;
      EXPECT_EQ(taken, bad_chunk + 1);
    }
    // ...and without one, every chunk of a.txt is taken before the read error is raised.
    {
      TextStream stream(listed, 100, anywhere);
      size_t taken = 0;
      const std::string message = tf::testing::error_message<InputError>([&] {
        for_each_chunk<int>(stream, workers, [](TextStream::Chunk&, int&) {}, [&](const TextStream::Chunk&, const int&) { ++taken; });
      });
      EXPECT_NE(message.find("b.txt"), std::string::npos) << message;
      EXPECT_EQ(taken, chunks_of_a);
    }
    std::filesystem::rename(dir / "b.moved", dir / "b.txt");
  }
}

}  // namespace
}  // namespace tf::data

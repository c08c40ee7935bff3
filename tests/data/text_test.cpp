// read_text on files and folders, and the UTF-8 validator against hand-made byte sequences.
#include "data/text.h"

#include <gtest/gtest.h>

#include "framework/error.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf::data {
namespace {

using tf::testing::TempDir;
using tf::testing::write_file;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(first_invalid_utf8(""), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("plain ASCII\n"), std::string_view::npos);
  // é (2 bytes), € (3 bytes), 𝄞 U+1D11E (4 bytes), U+10FFFF (the largest scalar value).
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E \xF4\x8F\xBF\xBF"), std::string_view::npos);
}

TEST(Utf8, NamesTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2u);                  // lone continuation byte
  EXPECT_EQ(first_invalid_utf8("abc\xC3"), 3u);                 // truncated 2-byte sequence
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);                // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xE0\x80\xAF"), 1u);           // overlong 3-byte form
  EXPECT_EQ(first_invalid_utf8("xy\xED\xA0\x80"), 2u);          // surrogate U+D800
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);        // U+110000, above the Unicode range
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\xFF"), 2u);            // FF never occurs in UTF-8
  EXPECT_EQ(first_invalid_utf8("\xE2\x82\x41"), 0u);            // bad third byte
}

TEST(ReadText, ReadsAFileAndAFolderInSortedOrder) {
  TempDir dir;
  write_file(dir / "corpus/b.txt", "second");
  write_file(dir / "corpus/a.txt", "first\n");
  write_file(dir / "corpus/c.txt", "th\xC3\xAFrd");
  EXPECT_EQ(read_text(dir / "corpus/a.txt"), "first\n");
  EXPECT_EQ(read_text(dir / "corpus"), "first\n\nsecond\nth\xC3\xAFrd");
}

TEST(ReadText, InvalidUtf8NamesFileAndOffset) {
  TempDir dir;
  write_file(dir / "corpus/a.txt", "fine");
  write_file(dir / "corpus/bad.txt", "hello \xC3\xA9 w\xFForld");
  const std::string message = testing::error_message<InputError>([&] { read_text(dir / "corpus"); });
  EXPECT_NE(message.find("bad.txt"), std::string::npos) << message;
  EXPECT_NE(message.find("byte offset 10"), std::string::npos) << message;
}

TEST(ReadText, MissingPathAndEmptyFolderAreInputErrors) {
  TempDir dir;
  EXPECT_THROW(read_text(dir / "nowhere.txt"), InputError);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_THROW(read_text(dir / "empty"), InputError);
}

// A symbolic link loop in a corpus folder (or an entry that cannot be examined) is bad input naming
// the entry, not a filesystem_error escaping as an internal error; a loop given as the path itself too.
TEST(ReadText, SymlinkLoopsAreInputErrorsNamingThePath) {
  TempDir dir;
  std::filesystem::create_directories(dir / "corpus");
  write_file(dir / "corpus" / "a.txt", "some text");
  std::filesystem::create_symlink("loop", dir / "corpus" / "loop");  // loop -> loop
  tf::testing::expect_error<InputError>([&] { read_text(dir / "corpus"); },
                                        "read_text: '" + (dir / "corpus" / "loop").string() + "': ");
  tf::testing::expect_error<InputError>([&] { read_text(dir / "corpus" / "loop"); },
                                        "read_text: '" + (dir / "corpus" / "loop").string() + "'");
}

}  // namespace
}  // namespace tf::data

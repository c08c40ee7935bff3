// train/output_path: each way an output path cannot be written is refused with the option, the path
// and what was expected, and a check writes nothing; paths that can be written pass.
#include "train/output_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "support/errors.h"
#include "train/run_fixture.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::error_message;

void expect_has(const std::string& message, const std::string& fragment) {
  EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
}

// Every file and folder under `dir`, to show that a check leaves it as it was.
std::vector<fs::path> listing(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(OutputPath, AFileThatCannotBeWrittenIsRefusedByOptionAndPath) {
  tf::testing::TempDir tmp;
  tf::testing::write_file(tmp / "a_file", "x");
  const auto before = listing(tmp.path());
  const fs::path missing = tmp / "missing" / "c.png";
  expect_has(error_message<InputError>([&] { check_output_file("plot --out", missing); }),
             "plot --out '" + missing.string() + "': the folder '" + (tmp / "missing").string() +
                 "' does not exist; expected a file in an existing folder that can be written");
  const fs::path under_file = tmp / "a_file" / "c.png";
  expect_has(error_message<InputError>([&] { check_output_file("plot --out", under_file); }),
             "plot --out '" + under_file.string() + "': '" + (tmp / "a_file").string() + "' is a file, not a folder");
  expect_has(error_message<InputError>([&] { check_output_file("report --out", tmp.path()); }),
             "report --out '" + tmp.path().string() + "' is a folder; expected the name of a file to write");
  EXPECT_EQ(listing(tmp.path()), before) << "a check wrote something";

  check_output_file("plot --out", tmp / "new.png");  // a new file in a folder that can be written
  check_output_file("plot --out", tmp / "a_file");   // an existing file is replaced
  const tf::testing::CwdGuard here(tmp.path());
  check_output_file("plot --out", "relative.png");   // the current folder
}

TEST(OutputPath, AFolderThatCannotBeCreatedIsRefusedByOptionAndPath) {
  tf::testing::TempDir tmp;
  tf::testing::write_file(tmp / "a_file", "x");
  const auto before = listing(tmp.path());
  expect_has(error_message<InputError>([&] { check_output_folder("inspect --out", tmp / "a_file"); }),
             "inspect --out '" + (tmp / "a_file").string() + "' is a file; expected a folder (created when missing)");
  const fs::path deep = tmp / "a_file" / "x" / "y";
  expect_has(error_message<InputError>([&] { check_output_folder("checkpoint.dir", deep); }),
             "checkpoint.dir '" + deep.string() + "': cannot create the folder: '" + (tmp / "a_file").string() +
                 "' is a file, not a folder");
  EXPECT_EQ(listing(tmp.path()), before) << "a check wrote something";

  check_output_folder("inspect --out", tmp.path());             // an existing folder
  check_output_folder("inspect --out", tmp / "new" / "deeper");  // created with its parents
  const tf::testing::CwdGuard here(tmp.path());
  check_output_folder("data.cache_dir", "data/cache");  // relative, under the current folder
  expect_has(error_message<InputError>([&] { check_output_folder("checkpoint.dir", "a_file/run"); }),
             "checkpoint.dir 'a_file/run': cannot create the folder: 'a_file' is a file, not a folder");
  EXPECT_FALSE(fs::exists(tmp / "new")) << "the check created the folder";
  EXPECT_FALSE(fs::exists(tmp / "data")) << "the check created the folder";
}

// Without write permission (not testable as root, whom permissions do not stop).
TEST(OutputPath, AFolderWithoutWritePermissionIsRefusedWithTheSystemsReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes in any folder";
  tf::testing::TempDir tmp;
  fs::create_directories(tmp / "locked");
  fs::permissions(tmp / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  expect_has(error_message<InputError>([&] { check_output_file("plot --out", tmp / "locked" / "c.png"); }),
             "': the folder '" + (tmp / "locked").string() + "' cannot be written (Permission denied)");
  expect_has(error_message<InputError>([&] { check_output_folder("inspect --out", tmp / "locked" / "maps"); }),
             "': cannot create the folder: '" + (tmp / "locked").string() + "' cannot be written (Permission denied)");
  fs::permissions(tmp / "locked", fs::perms::owner_all);
}

}  // namespace
}  // namespace tf::train

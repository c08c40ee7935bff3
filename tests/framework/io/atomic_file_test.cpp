// Files written whole or not at all: a refused write (here a file size limit, as a full disk refuses)
// names the file, keeps the previous one and leaves no partial file.
#include "framework/io/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "framework/error.h"
#include "support/temp_dir.h"

namespace tf {
namespace {

namespace fs = std::filesystem;

TEST(AtomicFile, ACommittedFileReplacesThePreviousOneWhole) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "out.bin";
  std::ofstream(file) << "old";
  {
    AtomicFile out(file);
    out.write(std::string_view("new "));
    out.pad(3);
    EXPECT_EQ(testing::read_file(file), "old");  // nothing shows before the commit
    out.commit();
  }
  EXPECT_EQ(testing::read_file(file), std::string("new \0\0\0", 7));
  {
    AtomicFile abandoned(file);
    abandoned.write(std::string_view("lost"));
  }  // destroyed uncommitted: as if never begun
  EXPECT_EQ(testing::read_file(file), std::string("new \0\0\0", 7));
  for (const auto& entry : fs::directory_iterator(dir.path())) EXPECT_EQ(entry.path(), file);
}

TEST(AtomicFile, AFullDiskIsNamedAndKeepsThePreviousFile) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "model.gguf";
  std::ofstream(file) << "previous";
  const pid_t child = ::fork();
  if (child == 0) {  // a file size limit makes writes fail with EFBIG, as a full disk does with ENOSPC
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      AtomicFile out(file);
      const std::string big(1 << 20, 'x');
      out.write(std::string_view(big));
      out.commit();
    } catch (const InputError& e) {
      const std::string message = e.what();
      const bool named = message.find("model.gguf.partial-") != std::string::npos &&
                         message.find("cannot write") != std::string::npos &&
                         message.find("is the disk full?") != std::string::npos;
      ::_exit(named ? 0 : 3);
    }
    ::_exit(4);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the message does not name the file or the cause; 4: no error";
  EXPECT_EQ(testing::read_file(file), "previous");
  for (const auto& entry : fs::directory_iterator(dir.path())) EXPECT_EQ(entry.path(), file);
}

}  // namespace
}  // namespace tf

// The run-folder tests' fixture: a tiny GPT recipe on an English-like text whose run folder is
// tmp/run, a quiet output, and a snapshot of every file in the folder ("nothing lost" is the
// snapshot unchanged).
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "framework/error.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::testing {

namespace fs = std::filesystem;

class RunFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = tmp_.path() / "text.txt";
    tf::testing::write_file(text_, tf::testing::english_text(6000));
    quiet_.out = &sink_;
  }
  train::Recipe recipe(std::vector<std::string> more) const {
    more.push_back("eval.interval=0");
    return tf::testing::tiny_recipe("tiny_gpt", text_, dir_, tmp_.path() / "cache", std::move(more));
  }
  // Every file under a folder (recursively) with its bytes: "nothing lost" is this map unchanged.
  static std::map<std::string, std::string> snapshot(const fs::path& folder) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(folder))
      if (e.is_regular_file()) files[fs::relative(e.path(), folder).string()] = read_file(e.path());
    return files;
  }
  std::map<std::string, std::string> snapshot() const { return snapshot(dir_); }
  std::string error_of(const train::Recipe& r, const train::TrainOptions& o) {
    try {
      train::train(r, o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  tf::testing::RunTempDir tmp_;
  fs::path text_, dir_ = tmp_.path() / "run";
  std::ostringstream sink_;
  train::TrainOptions quiet_;
};

}  // namespace tf::testing

// The floors of the house (README, "Architecture") as a fact about #include lines: a file includes
// only its own floor and the floors below it. cmake/floors.cmake checks the same for linking.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// What each floor may include, its own folder among them.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> floors = {
      {"framework", {"framework"}},
      {"layers", {"framework", "layers"}},
      {"optim", {"framework", "optim"}},
      {"data", {"framework", "data"}},
      {"train", {"framework", "layers", "optim", "data", "export", "train"}},
      {"inspect", {"framework", "layers", "optim", "data", "train", "inspect"}},
      {"export", {"framework", "layers", "data", "export"}},
      {"tools", {"framework", "layers", "optim", "data", "train", "inspect", "export", "tools"}},
  };
  return floors;
}

// "line N includes X/..." for every include of `text` (a file of `floor`) that reaches a folder the
// floor may not include.
std::vector<std::string> upward_includes(const std::string& floor, const std::string& text) {
  static const std::regex include(R"(^\s*#\s*include\s*"([a-z_]+)/)");
  std::vector<std::string> out;
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    std::smatch m;
    if (std::regex_search(line, m, include) && allowed().count(m[1]) && !allowed().at(floor).count(m[1]))
      out.push_back("line " + std::to_string(n) + " includes " + m[1].str() + "/");
  }
  return out;
}

TEST(Floors, TheCheckerFindsAnUpwardInclude) {
  EXPECT_EQ(upward_includes("framework", "#include <vector>\n#include \"framework/tensor.h\"\n  #include \"layers/linear.h\"\n"),
            std::vector<std::string>{"line 3 includes layers/"});
  EXPECT_EQ(upward_includes("optim", "#include \"data/batcher.h\"\n"), std::vector<std::string>{"line 1 includes data/"});
  EXPECT_TRUE(upward_includes("train", "#include \"layers/x.h\"\n#include \"optim/y.h\"\n").empty());
}

TEST(Floors, NoFileIncludesAFloorAboveItsOwn) {
  int files = 0;
  for (const auto& [floor, _] : allowed()) {
    const fs::path dir = fs::path(TAPEFORMER_SOURCE_DIR) / floor;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cpp") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      ++files;
      for (const std::string& finding : upward_includes(floor, text.str()))
        ADD_FAILURE() << fs::relative(entry.path(), TAPEFORMER_SOURCE_DIR).string() << ": " << finding;
    }
  }
  EXPECT_GT(files, 100);
}

// Layers are made of ops: they reach the kernels only through framework/ops (a kernel's entry points
// are the ops' business; a layer that called one would bypass the tape).
TEST(Floors, NoLayerIncludesAKernelHeader) {
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(TAPEFORMER_SOURCE_DIR) / "layers")) {
    std::ifstream in(entry.path());
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.find("#include \"framework/kernels/") != std::string::npos)
        ADD_FAILURE() << fs::relative(entry.path(), TAPEFORMER_SOURCE_DIR).string() << ": line " << n << " includes a kernel";
    }
  }
}

}  // namespace

// docs/errors.md against the sources: every bad-input message the program can throw (a
// tf::InputError or ConfigError, exit code 2) appears there, so that the doc and the program cannot
// drift apart. A message is found by its key: the first string literal of its throw site with at
// least 8 characters (adjacent literals joined, escapes read, whitespace collapsed, surrounding
// quotes, colons and brackets trimmed), cut to 40 characters. The doc writes values as <placeholders>
// between such literals, so the key of a message it describes appears in it word for word.
// What tools/main.cpp prints itself (CLI11's usage errors, an unknown command) is not thrown; its
// rows are checked by tests/train/errors_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

constexpr size_t kMinKey = 8, kMaxKey = 40;

// The folders whose code the program runs (README, "Architecture").
const char* const kFolders[] = {"framework", "layers", "optim", "data", "train", "inspect", "export", "tools"};

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string collapse_whitespace(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && !out.empty() && out.back() == ' ') continue;
    out += space ? ' ' : c;
  }
  return out;
}

std::string trim(const std::string& s) {
  const char* edges = " :;,.'()";
  const size_t first = s.find_first_not_of(edges);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(edges) - first + 1);
}

// The string literals of a call's argument text, adjacent ones joined ("a" "b" is "ab"), with their
// escapes read; char literals and // comments skipped.
std::vector<std::string> literals(const std::string& args) {
  std::vector<std::string> out;
  bool joinable = false;  // only whitespace since the last literal ended
  for (size_t i = 0; i < args.size(); ++i) {
    const char c = args[i];
    if (c == '/' && i + 1 < args.size() && args[i + 1] == '/') {
      i = args.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (c == '\'') {  // '"' and '\'' are not strings
      i += args[i + 1] == '\\' ? 3 : 2;
      joinable = false;
      continue;
    }
    if (c != '"') {
      if (c != ' ' && c != '\n' && c != '\t') joinable = false;
      continue;
    }
    std::string s;
    for (++i; i < args.size() && args[i] != '"'; ++i) {
      if (args[i] != '\\') {
        s += args[i];
        continue;
      }
      const char e = args[++i];
      s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    }
    if (joinable && !out.empty()) out.back() += s;
    else out.push_back(s);
    joinable = true;
  }
  return out;
}

// The text from the '(' at `open` to its matching ')', strings and char literals skipped.
std::string call_arguments(const std::string& text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) i += text[i] == '\\';
    } else if (c == '\'') {
      i += text[i + 1] == '\\' ? 3 : 2;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return text.substr(open, i - open + 1);
    }
  }
  return text.substr(open);
}

// `args` ("(a, b, c)") without its first n arguments: the message parts of TF_CHECK_INPUT (after the
// condition) and of TF_NOTE_CONFIG (after the list, the condition and the keys).
std::string drop_arguments(const std::string& args, int n) {
  int depth = 0;
  for (size_t i = 0; i < args.size() && n > 0; ++i) {
    const char c = args[i];
    if (c == '"') {
      for (++i; i < args.size() && args[i] != '"'; ++i) i += args[i] == '\\';
    } else if (c == '\'') {
      i += args[i + 1] == '\\' ? 3 : 2;
    } else if (c == '(' || c == '{') {
      ++depth;
    } else if (c == ')' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 1 && --n == 0) {
      return "(" + args.substr(i + 1);
    }
  }
  return n > 0 ? "()" : args;
}

// A message's key, or "" when no literal of it is long enough to stand for it.
std::string key_of(const std::string& args) {
  for (const std::string& s : literals(args)) {
    const std::string t = trim(collapse_whitespace(s));
    if (t.size() >= kMinKey) return trim(t.substr(0, kMaxKey));
  }
  return "";
}

struct Site {
  std::string where;  // file:line
  std::string key;    // "" when the message is made elsewhere (a variable, a helper's result)
};

// Every place in `text` that throws bad input: TF_CHECK_INPUT, TF_NOTE_CONFIG, InputError(...) and
// ConfigError(...), outside comments and #define lines.
std::vector<Site> bad_input_sites(const std::string& file, const std::string& text) {
  static const std::regex call(R"(\b(TF_CHECK_INPUT|TF_NOTE_CONFIG|InputError|ConfigError)\s*\()");
  std::vector<Site> sites;
  for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
    const size_t at = it->position();
    const size_t line_start = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
    const std::string before = text.substr(line_start, at - line_start);
    if (before.find("//") != std::string::npos || before.find("#define") != std::string::npos) continue;
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
    const std::string name = (*it)[1];
    const int skipped = name == "TF_CHECK_INPUT" ? 1 : name == "TF_NOTE_CONFIG" ? 3 : 0;
    const std::string message = drop_arguments(call_arguments(text, at + it->length() - 1), skipped);
    sites.push_back({file + ":" + std::to_string(line), key_of(message)});
  }
  return sites;
}

TEST(ErrorsDocCoverage, TheScannerFindsEachMessagesKey) {
  const std::string code =
      "  // TF_CHECK_INPUT(a, \"a comment is no site\");\n"
      "  TF_CHECK_INPUT(n > 0, \"model.d_model (\", n, \") must be \"\n"
      "                 \"positive, got \", n);\n"
      "  throw InputError(concat(path, \": is a \\\"folder\\\", not a recipe file and that is far too long\"));\n"
      "  TF_NOTE_CONFIG(found, x, ({\"model.x\"}), \"x\", ')', \"y\");\n"
      "  TF_CHECK_INPUT(ok, report());\n"
      "  TF_CHECK_INPUT(field(t, \"payload_offset\", v), where, \": its header is malformed\");\n";
  const std::vector<Site> sites = bad_input_sites("f.cpp", code);
  ASSERT_EQ(sites.size(), 5u);
  EXPECT_EQ(sites[0].where, "f.cpp:2");
  EXPECT_EQ(sites[0].key, "model.d_model");  // the first literal long enough, trimmed
  EXPECT_EQ(sites[1].key, "is a \"folder\", not a recipe file and tha");  // escapes read, cut to 40
  EXPECT_EQ(sites[2].key, "");  // "model.x" is 7 characters: no key (the char literal ')' is skipped)
  EXPECT_EQ(sites[3].key, "");
  EXPECT_EQ(sites[4].key, "its header is malformed");  // not the condition's "payload_offset"
  EXPECT_EQ(literals("\"a\" \"b\", \"c\""), (std::vector<std::string>{"ab", "c"}));
}

// The row of docs/errors.md for every bad-input message of the program.
TEST(ErrorsDocCoverage, EveryBadInputMessageHasItsRow) {
  const fs::path root = TAPEFORMER_SOURCE_DIR;
  std::string doc = read(root / "docs/errors.md");
  ASSERT_GT(doc.size(), 1000u);
  doc = collapse_whitespace(std::regex_replace(doc, std::regex(R"(\\\|)"), "|"));  // `a \| b` in a table cell
  std::vector<std::string> missing, unkeyed;
  size_t checked = 0;
  for (const char* folder : kFolders) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      const std::string file = fs::relative(entry.path(), root).string();
      if (file == "framework/error.h") continue;  // the definitions themselves
      for (const Site& s : bad_input_sites(file, read(entry.path()))) {
        if (s.key.empty()) {
          unkeyed.push_back(s.where);
          continue;
        }
        ++checked;
        if (doc.find(s.key) == std::string::npos) missing.push_back(s.where + ": " + s.key);
      }
    }
  }
  EXPECT_GT(checked, 250u) << "the scanner lost the throw sites?";
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " bad-input messages have no row in docs/errors.md (the key "
                               << "shown, the first literal of the message, must appear there):" << list;
  // Messages made elsewhere (a helper's text, a rethrown reason) are not checked here; a new one
  // should be rare, and its text should sit at its throw site where this test can see it.
  list.clear();
  for (const std::string& u : unkeyed) list += "\n  " + u;
  EXPECT_LE(unkeyed.size(), 12u) << "throw sites without a literal of " << kMinKey
                                 << " characters (write the message's words at the throw site):" << list;
}

}  // namespace

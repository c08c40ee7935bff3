// `tapeformer gradcheck --model`: runs the program on the tiny recipes in this folder for GPT and
// BERT with each position encoding, and reads its exit code and table.
#include <gtest/gtest.h>

#include <regex>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include "layers/models/model.h"
#include "train/recipe.h"

namespace tf {
namespace {

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ProgramRun run(const std::string& args) {
  const std::string command = std::string(TAPEFORMER_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  ProgramRun r;
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string recipe_path(const char* name) { return std::string(TAPEFORMER_SOURCE_DIR) + "/tests/layers/" + name; }

// The parameter rows of the table: lines after the "parameter" header up to the summary line.
struct Row {
  std::string name, result;
  double max_rel_error = 0;
};
std::vector<Row> table_rows(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  bool in_table = false;
  std::vector<Row> rows;
  while (std::getline(lines, line)) {
    if (line.rfind("parameter ", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.find(" parameters, ") != std::string::npos) {
      in_table = false;
      continue;
    }
    // name  (d0, d1)  abs  rel  result  [i, j] backward a numeric b: the shape has spaces, so read the
    // name, then the fields after the shape's ')'.
    Row row;
    std::istringstream fields(line);
    fields >> row.name;
    const size_t close = line.find(')');
    std::istringstream tail(line.substr(close + 1));
    double abs_err;
    tail >> abs_err >> row.max_rel_error >> row.result;
    rows.push_back(row);
  }
  return rows;
}

struct CommandCase {
  const char* recipe;
  const char* position;
};

class GradcheckCommand : public ::testing::TestWithParam<CommandCase> {};

TEST_P(GradcheckCommand, EveryParameterPassesInModelOrderWithItsWorstElement) {
  const CommandCase c = GetParam();
  const std::string set = std::string("model.position=") + c.position;
  const ProgramRun r = run("gradcheck --model " + recipe_path(c.recipe) + " --set " + set +
                    " --vocab 9 --seq-len 4 --batch 2 --d-model 8 --layers 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // One row per parameter of the model the command built, each passing, worst first.
  train::Recipe recipe = train::load_recipe(recipe_path(c.recipe), {set});
  recipe.model.vocab_size = 9;
  recipe.model.max_seq_len = 4;
  recipe.model.d_model = 8;
  recipe.model.n_layers = 2;
  if (recipe.model.d_ff > 0) recipe.model.d_ff = 16;  // the recipe's d_ff / d_model = 2 kept
  layers::Init init{Rng(1)};
  const layers::ParamList params = layers::build_model(recipe.model, init)->parameters();
  const std::vector<Row> rows = table_rows(r.output);
  ASSERT_EQ(rows.size(), params.size()) << r.output;
  for (const auto& p : params) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& row) { return row.name == p.name; });
    ASSERT_NE(it, rows.end()) << p.name << " missing from\n" << r.output;
    EXPECT_EQ(it->result, "pass") << p.name;
    EXPECT_LE(it->max_rel_error, 1e-6) << p.name;
  }
  // In model order, each with its worst element, under a header that says what is compared.
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].name, params[i].name) << r.output;
  EXPECT_NE(r.output.find("compared, element by element, with central\nfinite differences in float64"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("pass    \\[[0-9, ]+\\] +backward +[-0-9.e+]+ +numeric")))
      << r.output;
  EXPECT_NE(r.output.find(std::string("position ") + c.position), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, GradcheckCommand,
    ::testing::Values(CommandCase{"gpt_tiny.yaml", "none"}, CommandCase{"gpt_tiny.yaml", "sinusoidal"},
                      CommandCase{"gpt_tiny.yaml", "learned"}, CommandCase{"gpt_tiny.yaml", "rope"},
                      CommandCase{"bert_tiny.yaml", "none"}, CommandCase{"bert_tiny.yaml", "sinusoidal"},
                      CommandCase{"bert_tiny.yaml", "learned"}, CommandCase{"bert_tiny.yaml", "rope"}),
    [](const auto& info) {
      const std::string recipe = info.param.recipe;
      return recipe.substr(0, recipe.find('_')) + "_" + info.param.position;
    });

// Every shipped recipe's model passes as it is (shrunk in width, never in its layer pattern: a
// Jamba-like [attention, mamba, mamba, mamba] keeps four layers).
std::vector<std::string> shipped_recipes() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TAPEFORMER_SOURCE_DIR) + "/recipes"))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ShippedRecipeGradcheck : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedRecipeGradcheck, EveryParameterPasses) {
  const ProgramRun r = run("gradcheck --model " + std::string(TAPEFORMER_SOURCE_DIR) + "/recipes/" + GetParam() + ".yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" parameters, 0 failed"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Recipes, ShippedRecipeGradcheck, ::testing::ValuesIn(shipped_recipes()),
                         [](const auto& info) { return info.param; });

// --explain shows a passing and a failing op; the failing one's backward is half the finite differences.
TEST(GradcheckCommand, ExplainShowsWhatAFailureLooksLike) {
  const ProgramRun r = run("gradcheck --explain");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("mul\\(x, x\\) +max abs err [-0-9.e+]+, max rel err [-0-9.e+]+: pass")))
      << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("square \\(wrong backward\\) +max abs err [-0-9.e+]+, max rel err "
                                                          "5\\.00e-01: FAIL\n  worst element +\\[[0-9, ]+\\] +backward +"
                                                          "([-0-9.e+]+) +numeric +([-0-9.e+]+)")))
      << r.output;
  EXPECT_NEAR(std::stod(m[1]) * 2, std::stod(m[2]), 1e-5 * std::abs(std::stod(m[2])));
}

// docs/gradcheck.md shows each table's header as an indented line; the program prints it exactly.
TEST(GradcheckCommand, TheDocShowsTheHeadersAsPrinted) {
  std::ifstream file(std::string(TAPEFORMER_SOURCE_DIR) + "/docs/gradcheck.md");
  std::stringstream doc;
  doc << file.rdbuf();
  const std::string text = doc.str();
  const auto quoted = [&](const std::string& first_word) {
    const std::string start = "\n    " + first_word + " ";
    std::smatch m;
    EXPECT_TRUE(std::regex_search(text, m, std::regex(start + "[^\n]*"))) << "no header '" << first_word << "' in the doc";
    return m.empty() ? std::string("(none)") : m.str().substr(5);  // without "\n" and the indentation
  };
  const auto printed = [](const ProgramRun& r, const std::string& line) {
    return r.output.find("\n" + line + "\n") != std::string::npos;
  };
  const ProgramRun ops = run("gradcheck --ops");
  const std::string ops_header = quoted("op");
  EXPECT_TRUE(printed(ops, ops_header)) << ops_header << "\nis not a line of\n" << ops.output;
  const ProgramRun model = run("gradcheck --model " + recipe_path("gpt_tiny.yaml"));
  const std::string model_header = quoted("parameter");
  EXPECT_TRUE(printed(model, model_header)) << model_header << "\nis not a line of\n" << model.output;
}

TEST(GradcheckCommandErrors, BadInputExitsWithTwo) {
  EXPECT_EQ(run("gradcheck --model " + recipe_path("no_such_recipe.yaml")).exit_code, 2);
  const ProgramRun bad_key = run("gradcheck --model " + recipe_path("gpt_tiny.yaml") + " --set model.positon=rope");
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.output.find("positon"), std::string::npos) << bad_key.output;
  // d_model 6 cannot be split into the recipe's 2 heads with an even (RoPE) head size of 3.
  EXPECT_EQ(run("gradcheck --model " + recipe_path("gpt_tiny.yaml") + " --set model.position=rope --d-model 6").exit_code, 2);
  EXPECT_EQ(run("gradcheck").exit_code, 2);                                   // neither --ops nor --model
  EXPECT_EQ(run("gradcheck --ops --model " + recipe_path("gpt_tiny.yaml")).exit_code, 2);  // both
  // Ranged flags: a check of a 10,000-token vocabulary would run for hours.
  const ProgramRun huge = run("gradcheck --model " + recipe_path("gpt_tiny.yaml") + " --vocab 10000");
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_NE(huge.output.find("--vocab: must be an integer in [2, 512], got 10000"), std::string::npos) << huge.output;
}

}  // namespace
}  // namespace tf

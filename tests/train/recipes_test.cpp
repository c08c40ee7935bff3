// Every shipped recipe (recipes/*.yaml) parses and dry-runs: on the Brown corpus when
// the data root holds brown/raw (scripts/setup.sh --corpus), else on a generated text via data.corpus=files (the output says
// which). And docs/recipes.md mentions every key of train::recipe_keys().
#include <gtest/gtest.h>

#include <regex>

#include "data/root.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::read_file;
using tf::testing::source_path;

std::vector<fs::path> shipped_recipes() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(source_path("recipes")))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

using tf::testing::CwdGuard;

TEST(Recipes, EveryShippedRecipeParsesAndDryRuns) {
  const std::vector<fs::path> recipes = shipped_recipes();
  ASSERT_GE(recipes.size(), 5u);
  tf::testing::RunTempDir tmp;
  const fs::path brown_raw = tf::data::data_root("") / "brown/raw";
  const bool brown = fs::is_directory(brown_raw);
  // Brown: data.brown_dir is a temporary folder whose raw/ points at the installed corpus, so the
  // prepared splits land there. Without it: a generated text instead. Recipes of other corpora
  // (gpt_linux_c.yaml: scripts/setup.sh --corpus linux) dry-run on it too.
  const fs::path text = tmp / "text.txt";
  tf::testing::write_file(text, tf::testing::english_text(20000));
  if (brown) {
    fs::create_directories(tmp / "brown");
    fs::create_directory_symlink(brown_raw, tmp / "brown/raw");
  }
  std::cout << "[ info ] dry runs on "
            << (brown ? "the Brown corpus (" + brown_raw.string() + ")"
                      : "a generated text with data.corpus=files: " + brown_raw.string() + " is missing")
            << "\n";
  const CwdGuard cwd(tmp.path());
  for (const fs::path& file : recipes) {
    SCOPED_TRACE(file.filename().string());
    const std::string name = file.stem().string();
    std::vector<std::string> overrides = {"checkpoint.dir=" + (tmp / ("run_" + name)).string(),
                                          "data.cache_dir=" + (tmp / "cache").string()};
    const std::string yaml = read_file(file);
    const bool own_corpus = yaml.find("corpus: files") != std::string::npos || yaml.find("corpus: linux") != std::string::npos;
    if (!brown || own_corpus) {
      overrides.push_back("data.corpus=files");
      overrides.push_back("data.train_path=" + text.string());
    } else {
      overrides.push_back("data.brown_dir=" + (tmp / "brown").string());
    }
    Recipe recipe;
    ASSERT_NO_THROW(recipe = load_recipe(file.string(), overrides));
    std::ostringstream out;
    TrainOptions options;
    options.dry_run = true;
    options.out = &out;
    const auto start = std::chrono::steady_clock::now();
    TrainSummary summary;
    ASSERT_NO_THROW(summary = train(recipe, options)) << out.str();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(summary.steps_done, 0);
    EXPECT_FALSE(fs::exists(tmp / ("run_" + name))) << "a dry run wrote its run folder";
    // The plan states the model's size, and the printed recipe is this one.
    std::smatch m;
    const std::string printed = out.str();
    ASSERT_TRUE(std::regex_search(printed, m, std::regex(R"(parameters +(\d+) )"))) << printed;
    EXPECT_GT(std::stoll(m[1]), recipe.model.d_model * recipe.model.d_model * recipe.model.n_layers);
    EXPECT_NE(printed.find("d_model: " + std::to_string(recipe.model.d_model)), std::string::npos);
    std::cout << "[ info ] " << file.filename().string() << ": " << m[1] << " parameters, dry run " << seconds
              << " s\n";
  }
}

// The lines of docs/recipes.md under each heading, keyed by the heading's text.
std::vector<std::pair<std::string, std::string>> sections_of(const std::string& doc) {
  std::vector<std::pair<std::string, std::string>> out = {{"", ""}};
  std::istringstream in(doc);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind('#', 0) == 0)
      out.emplace_back(line, "");
    else
      out.back().second += line + "\n";
  }
  return out;
}

TEST(Recipes, DocsMentionEveryKey) {
  const fs::path doc_path = source_path("docs/recipes.md");
  if (!fs::exists(doc_path)) GTEST_SKIP() << doc_path.string() << " does not exist yet: nothing to check";
  const std::string doc = read_file(doc_path);
  const auto sections = sections_of(doc);
  std::vector<std::string> missing;
  for (const RecipeKeyDoc& k : recipe_keys()) {
    if (doc.find(k.key) != std::string::npos) continue;  // "optim.lr"
    // Or the short name as a word ("lr", `lr`) under a heading that names the section ("## optim").
    const std::string section = k.key.substr(0, k.key.find('.'));
    const std::regex word("(^|[^A-Za-z0-9_])" + k.key.substr(k.key.find('.') + 1) + "($|[^A-Za-z0-9_])");
    bool found = false;
    for (const auto& [heading, body] : sections)
      if (std::regex_search(heading, std::regex("(^|[^A-Za-z0-9_])" + section + "($|[^A-Za-z0-9_])")) &&
          std::regex_search(body, word))
        found = true;
    if (!found) missing.push_back(k.key);
  }
  EXPECT_TRUE(missing.empty()) << doc_path.string() << " does not mention " << missing.size() << " recipe keys: "
                               << ::testing::PrintToString(missing);
}

// scripts/tapeformer_model.py (the PyTorch twin that loads exported models) must know every model
// key: a field of its ModelConfig (from_dict refuses unknown keys) that the code then reads
// (cfg.key or self.key: it builds the option, or refuses it by name). A new model option that the
// twin ignores fails here. model.init_std and model.projection_init alone are exempt: they decide
// only how training starts, and the twin runs trained weights.
TEST(Recipes, ThePythonMirrorHandlesEveryModelKey) {
  const std::string mirror = read_file(source_path("scripts/tapeformer_model.py"));
  std::vector<std::string> missing;
  for (const RecipeKeyDoc& k : recipe_keys()) {
    if (k.key.rfind("model.", 0) != 0 || k.key == "model.init_std" || k.key == "model.projection_init") continue;
    const std::string name = k.key.substr(6);
    const bool field = std::regex_search(mirror, std::regex("\n    " + name + ": "));
    const bool read = std::regex_search(mirror, std::regex("(cfg|self)\\." + name + "($|[^A-Za-z0-9_])"));
    if (!field || !read) missing.push_back(k.key + (field ? " (never read)" : " (no field)"));
  }
  EXPECT_TRUE(missing.empty()) << "scripts/tapeformer_model.py does not handle " << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace tf::train

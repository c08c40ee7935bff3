// `tapeformer prepare RECIPE`: the recipe's corpus into token shards, ahead of training (docs/data.md);
// with --llmc DIR, also as llm.c token files.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "tools/commands.h"
#include "train/output_path.h"
#include "train/run.h"
#include "train/threads.h"

namespace tf::tools {

namespace {

// The shard's ids as an llm.c token file (uint16 ids: vocabularies up to 65,536).
void write_llmc(const data::TokenFile& shard, const std::filesystem::path& path) {
  TF_CHECK_INPUT(shard.info.width == 2, "prepare --llmc: llm.c token files hold uint16 ids; this vocabulary of ",
                 shard.info.vocab_size, " ids needs 4 bytes each");
  data::TokenFileInfo info;
  info.format = data::TokenFileFormat::llmc;
  data::TokenFileWriter writer(path, info);
  constexpr int64_t kSlice = 1 << 20;
  std::vector<int32_t> ids;
  for (int64_t at = 0; at < shard.tokens.size(); at += kSlice) {
    ids.resize(std::min(kSlice, shard.tokens.size() - at));
    shard.tokens.copy(at, static_cast<int64_t>(ids.size()), ids.data());
    writer.append(ids);
    shard.tokens.release_before(at + static_cast<int64_t>(ids.size()));
  }
  writer.finish();
}

}  // namespace

void add_prepare_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenize the recipe's corpus into token shards (docs/data.md)");
  static std::string recipe_path, llmc;
  static std::vector<std::string> overrides;
  cmd->add_option("recipe", recipe_path, "Recipe file (YAML), e.g. recipes/gpt_brown_char.yaml")->required();
  cmd->add_option("--set", overrides, "Override a recipe key: --set data.train_path=corpus/ (repeatable)");
  cmd->add_option("--llmc", llmc,
                  "Also write the shards as llm.c token files DIR/train.bin and DIR/val.bin (uint16 ids)");
  cmd->callback([&exit_code] {
    const train::Recipe recipe = train::load_recipe(recipe_path, overrides);
    if (!llmc.empty()) train::check_output_folder("prepare --llmc", llmc);
    train::check_output_folder("data.cache_dir", recipe.data.cache_folder());
    train::configure_threads(recipe.train.threads);
    const auto start = std::chrono::steady_clock::now();
    const data::PreparedCorpus corpus =
        train::prepare_recipe_corpus(recipe.data, recipe.model.arch, nullptr, true, &std::cout);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("corpus       %s\n", train::corpus_description(recipe.data, corpus).c_str());
    std::printf("shards       %s (%s)\n", corpus.folder.c_str(),
                corpus.reused ? "already prepared and current" : "prepared now");
    std::printf("tokens       %lld training, %lld validation; %s vocabulary of %d, %d bytes per id\n",
                static_cast<long long>(corpus.train_count), static_cast<long long>(corpus.val_count),
                std::string(corpus.tokenizer->kind()).c_str(), corpus.tokenizer->vocab_size(),
                corpus.train.info.width);
    std::printf("time         %.2f s\n", seconds);
    if (!llmc.empty()) {
      std::filesystem::create_directories(llmc);
      write_llmc(corpus.train, std::filesystem::path(llmc) / "train.bin");
      write_llmc(corpus.val, std::filesystem::path(llmc) / "val.bin");
      std::printf("llm.c        %s/train.bin, %s/val.bin\n", llmc.c_str(), llmc.c_str());
    }
    exit_code = 0;
  });
}

}  // namespace tf::tools

// `tapeformer info CKPT`: what a checkpoint holds: recipe, step, tokens seen, parameters, sizes.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "framework/io/hdf5_io.h"
#include "layers/module.h"
#include "tools/commands.h"
#include "train/checkpoint.h"
#include "train/run_folder.h"

namespace tf::tools {

void add_info_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("info", "Describe a checkpoint");
  static std::string checkpoint;
  cmd->add_option("checkpoint", checkpoint, "Checkpoint file (.h5), or a run folder for its newest checkpoint")->required();
  cmd->callback([&exit_code] {
    const std::filesystem::path file = train::checkpoint_argument(checkpoint);
    train::LoadedRun loaded = train::load_checkpoint(file);
    const train::Run& run = loaded.run;
    const H5Reader in(file.string());
    std::printf("checkpoint   %s (%.1f MiB, format %lld, written %s)%s\n", file.c_str(),
                std::filesystem::file_size(file) / 1048576.0, static_cast<long long>(train::kCheckpointFormat),
                in.read_attr_string("/", "created").c_str(),
                loaded.weights_only ? "\n             weights only (tapeformer export --format weights): no optimizer, "
                                      "dropout or data-order state; train --init-from takes it, --resume does not"
                                    : "");
    std::printf("run          %s (%.0f s of training)\n", run.run_id.empty() ? "(no id: written before run ids)" : run.run_id.c_str(),
                run.elapsed_seconds);
    // The run's real end: train.steps, or the count its time budget fixed.
    const std::string fixed_by =
        run.budget_steps > 0 ? " (the count train.time_budget " + run.recipe.train.time_budget + " fixed)" : "";
    std::printf("step         %lld of %lld%s\ntokens seen  %lld\ntokenizer    %s, vocabulary %d\n\nrecipe:\n",
                static_cast<long long>(run.step), static_cast<long long>(run.total_steps()), fixed_by.c_str(),
                static_cast<long long>(run.tokens_seen), std::string(run.tokenizer->kind()).c_str(),
                run.tokenizer->vocab_size());
    std::cout << run.recipe.to_yaml() << "\nparameters:\n" << layers::summarize(run.params);
    exit_code = 0;
  });
}

}  // namespace tf::tools

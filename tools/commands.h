// Each command of the `tapeformer` program adds its CLI11 subcommand here; main.cpp calls them all.
// A command's callback sets `exit_code`; errors are thrown (tf::InputError -> 2, other -> 1).
#pragma once
#include <CLI/CLI.hpp>

namespace tf::tools {

void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_sample_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);

}  // namespace tf::tools

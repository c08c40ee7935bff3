// Each command of the `tapeformer` program adds its CLI11 subcommand here; main.cpp calls them all.
// A command's callback sets `exit_code`; errors are thrown (tf::InputError -> 2, other -> 1).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tf::tools {

// A number >= 0: "--temperature: must be a number >= 0, got -1". (CLI11's NonNegativeNumber
// prints its range with DBL_MAX written out in full, 300 digits.)
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t used = 0;
        double value = -1;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        return used == text.size() && value >= 0 ? "" : "must be a number >= 0, got " + text;
      },
      "NUMBER >= 0");
}

void add_gradcheck_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_sample_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_info_command(CLI::App& app, int& exit_code);

}  // namespace tf::tools

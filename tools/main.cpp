// The `tapeformer` program: parses the command line and maps errors to messages and exit codes
// (0 success, 2 bad input or usage, 1 internal failure).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "framework/dist/comm.h"
#include "framework/error.h"
#include "tools/commands.h"
#include "train/interrupt.h"
#include "train/recipe.h"
#include "train/threads.h"

// Errors exit through dist::Comm::exit_after_error, without the libraries' teardown. HDF5 1.10.8
// leaks an object header when a header's checksum fails (a damaged checkpoint), and its teardown at
// exit then prints "HDF5: infinite loop closing library" and a line of package names under our
// error message. An error exit has nothing left to tear down: every file was closed as the exception
// unwound. Under mpirun, Note [failing together] (framework/dist/comm.h) decides which rank prints.

namespace {

// Every command but train and prepare (whose recipe says it: train.threads) takes --threads, and runs
// with that many OpenMP threads, set as soon as its command line is parsed: 0 (the default) means the
// physical cores (sample then chooses by model size and load: Note [decode threads]), and
// OMP_NUM_THREADS wins when set (train/threads.h).
void add_threads_options(CLI::App& app) {
  static int64_t threads = 0;
  for (CLI::App* cmd : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (cmd->get_name() == "train" || cmd->get_name() == "prepare") continue;
    cmd->add_option("--threads", threads,
                    "OpenMP threads; 0: the physical cores (sample: one for a model under 300k parameters, "
                    "else the cores other processes leave free); OMP_NUM_THREADS wins when set")
        ->capture_default_str()
        ->check(tf::tools::integer_in(0, 1024));
    cmd->parse_complete_callback([] { tf::train::configure_threads(threads); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  tf::train::apply_default_wait_policy(argv);  // first: it may re-execute the program
  tf::train::receive_signals_on_own_thread();  // before MPI and OpenMP start their threads
  tf::dist::Comm& comm = tf::dist::Comm::world();  // MPI_Init, when started by mpirun
  // Only training is distributed; N copies of any other command would print N times and race on
  // their output files. Every rank sees the same command line, so every rank stops here.
  if (comm.size() > 1 && argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "train") {
    if (comm.rank() == 0)
      std::cerr << "error: '" << argv[1] << "' runs in one process; under mpirun only 'train' runs (on "
                << comm.size() << " ranks here): start it without mpirun (docs/distributed.md)\n";
    return 2;
  }
  CLI::App app{"tapeformer: train small transformer language models on the CPU"};
  app.set_version_flag("--version", "tapeformer " TAPEFORMER_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  tf::tools::add_train_command(app, exit_code);
  tf::tools::add_prepare_command(app, exit_code);
  tf::tools::add_sample_command(app, exit_code);
  tf::tools::add_fill_command(app, exit_code);
  tf::tools::add_eval_command(app, exit_code);
  tf::tools::add_info_command(app, exit_code);
  tf::tools::add_inspect_command(app, exit_code);
  tf::tools::add_heads_command(app, exit_code);
  tf::tools::add_prune_command(app, exit_code);
  tf::tools::add_plot_command(app, exit_code);
  tf::tools::add_report_command(app, exit_code);
  tf::tools::add_export_command(app, exit_code);
  tf::tools::add_gradcheck_command(app, exit_code);
  add_threads_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (comm.rank() != 0) return 2;  // every rank parses the same command line: one message
    // A misspelled command ("trian") reaches CLI11 as a stray argument: name it and the nearest one.
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (argc > 1 && argv[1][0] != '-' && std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      const std::string near = tf::train::closest_name(argv[1], names);
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      std::cerr << "error: unknown command '" << argv[1] << "'" << (near.empty() ? "" : " (did you mean '" + near + "'?)")
                << "; the commands are " << all << " (tapeformer --help)\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const tf::InputError& e) {
    if (!comm.quiet()) std::cerr << tf::dist::error_prefix(comm) << "error: " << e.what() << "\n";
    comm.exit_after_error(2);
  } catch (const std::filesystem::filesystem_error& e) {
    // Every path the program touches is the user's (recipe, data, run folder): a file system refusal
    // is bad input, and the message names the path ("filesystem error: ...: Permission denied [p]").
    if (!comm.quiet()) std::cerr << tf::dist::error_prefix(comm) << "error: " << e.what() << "\n";
    comm.exit_after_error(2);
  } catch (const std::exception& e) {
    if (!comm.quiet()) std::cerr << tf::dist::error_prefix(comm) << "internal error: " << e.what() << "\n";
    comm.exit_after_error(1);
  }
  return exit_code;
}

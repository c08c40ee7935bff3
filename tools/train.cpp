// `tapeformer train RECIPE`: train a model from a YAML recipe (see docs/recipes.md).
#include <filesystem>
#include <iostream>

#include "framework/dist/comm.h"
#include "inspect/report.h"
#include "tools/commands.h"
#include "train/fine_tune.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace tf::tools {

namespace {
// The program as the user can type it from here: argv[0], relative to the working folder when it
// lies inside it (demo.sh runs /abs/path/build/tools/tapeformer from the repository root).
std::string program_as_typed(const std::string& argv0) {
  namespace fs = std::filesystem;
  if (argv0.empty()) return "tapeformer";
  if (argv0.find('/') == std::string::npos) return argv0;  // found on PATH
  std::error_code ec;
  const fs::path relative = fs::proximate(fs::path(argv0), fs::current_path(ec), ec);
  if (ec || relative.empty() || *relative.begin() == "..") return argv0;
  return relative.has_parent_path() ? relative.string() : "./" + relative.string();
}
}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("train", "Train a GPT or BERT from a YAML recipe");
  static std::string recipe_path;
  static std::vector<std::string> overrides;
  static bool dry_run = false;
  static std::string resume;
  static std::string profile;
  static bool anomaly = false;
  static bool overwrite = false;
  static bool accept_changes = false;
  cmd->add_option("recipe", recipe_path, "Recipe file (YAML), e.g. recipes/gpt_brown_char.yaml")->required();
  cmd->add_option("--set", overrides, "Override a recipe key: --set optim.lr=3e-4 (repeatable)");
  cmd->add_flag("--dry-run", dry_run, "Validate, build the model, print the resolved recipe and costs; train nothing");
  cmd->add_option("--profile", profile,
                  "Print where the time went: seconds per op (forward, backward) and phase, by the wall clock "
                  "or by process CPU time (steadier on a busy machine)")
      ->expected(0, 1)
      ->default_str("wall")
      ->check(CLI::IsMember({"wall", "cpu"}));
  cmd->add_flag("--anomaly", anomaly,
                "Check every op's output and gradient; stop at the first non-finite value, naming the op, "
                "layer and step (as train.anomaly: true; slow)");
  CLI::Option* resume_opt =
      cmd->add_option("--resume", resume, "Continue from CKPT, or from the run folder's newest checkpoint")
          ->expected(0, 1);
  cmd->add_flag("--overwrite", overwrite,
                "Start afresh in a run folder that holds an earlier run: its files move into "
                "previous-<time>/ inside the folder (nothing is deleted). With --resume CKPT of an earlier "
                "step: the run's later checkpoints and metrics records move there, and the run continues");
  static std::string branch;
  cmd->add_option("--branch", branch,
                  "With --resume: continue the run from its checkpoint in the new run folder DIR, leaving the "
                  "run's own folder as it is (e.g. a learning-rate experiment from an earlier checkpoint)")
      ->needs(resume_opt)
      ->excludes("--overwrite");
  static std::string more;
  cmd->add_option("--more", more,
                  "With --resume: train the run for this much more time (90s, 5m, 1.5h), measuring its speed "
                  "and fixing the step count as train.time_budget does")
      ->needs(resume_opt);
  static std::string init_from;
  cmd->add_option("--init-from", init_from,
                  "Fine-tune: start a new run (step 0, fresh optimizer) from the weights and tokenizer of CKPT "
                  "(a checkpoint, a run folder, a weights file, or a GGUF file tapeformer exported); model keys the "
                  "recipe leaves out are the checkpoint's, those it "
                  "writes must match them")
      ->excludes(resume_opt);
  cmd->add_flag("--accept-changes", accept_changes,
                "With --resume: continue with a recipe that changes the step count, schedule, learning rate, "
                "evaluation, checkpoints, logging or sampling")
      ->needs(resume_opt);
  cmd->callback([&exit_code, resume_opt, cmd] {
    if (anomaly) overrides.push_back("train.anomaly=true");
    // Every rank reads the recipe; a bad one stops them all with one message (framework/dist/comm.h).
    dist::SetupAgreement reading(dist::Comm::world());
    // Fine-tuning: the model keys the recipe leaves out are the checkpoint's.
    const train::Recipe recipe = init_from.empty() ? train::load_recipe(recipe_path, overrides)
                                                   : train::load_fine_tune_recipe(recipe_path, overrides, init_from);
    reading.succeeded();
    train::TrainOptions options;
    options.dry_run = dry_run;
    options.overwrite = overwrite;
    options.accept_changes = accept_changes;
    options.profile = profile;
    options.program = program_as_typed(cmd->get_parent()->get_name());
    if (resume_opt->count() > 0) options.resume = resume;
    if (!init_from.empty()) options.init_from = init_from;
    if (!branch.empty()) options.branch = branch;
    if (!more.empty()) {
      const std::optional<double> seconds = train::parse_duration(more);
      TF_CHECK_INPUT(seconds && *seconds > 0, "--more: expected a duration such as 90s, 5m or 1.5h, got '", more, "'");
      options.more_seconds = *seconds;
    }
    const train::TrainSummary summary = train::train(recipe, options);
    const std::string run_dir = branch.empty() ? recipe.checkpoint.dir : branch;
    if (recipe.log.report && !dry_run && !summary.last_checkpoint.empty() && dist::Comm::world().rank() == 0)
      std::cout << "report: " << inspect::write_run_report(run_dir).string() << "\n";
    // Stopped by Ctrl-C (after its checkpoint): 130, as a shell reports a stopped program, so that
    // scripts tell it from a finished run; 143 after SIGTERM.
    exit_code = summary.interrupted ? 128 + summary.stop_signal : 0;
  });
}

}  // namespace tf::tools

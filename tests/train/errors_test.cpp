// The user-facing errors of docs/errors.md that no closer test asserts by message: command-line
// usage, data and corpus, tokenizer forms, checkpoint format, anomaly mode, sampling and
// evaluation, each through the program (exit code 2, "error: " and the message on stderr) or the
// library call the program makes. And the doc itself: every test it names exists.
#include <gtest/gtest.h>

#include <tuple>
#include <hdf5.h>

#include <regex>
#include <set>

#include "data/text.h"
#include "data/tokenizer.h"
#include "framework/io/hdf5_io.h"
#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/metrics_log.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::error_message;
using tf::testing::read_file;

// A `tapeformer` run's exit code and stderr.
struct Outcome {
  int code;
  std::string err;
};

class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    tf::testing::write_file(text_, tf::testing::english_text(3000));
    quiet_.out = &sink_;
  }
  Recipe recipe(std::vector<std::string> more, const std::string& name = "tiny_gpt") const {
    more.insert(more.begin(), {"train.steps=2", "schedule.warmup_steps=1", "eval.interval=0"});
    return tf::testing::tiny_recipe(name, text_, tmp_ / "run", tmp_ / "cache", std::move(more));
  }
  Outcome run(const std::vector<std::string>& args) const {
    const int code = tf::testing::run_tapeformer(args, tmp_ / "out.txt", tmp_ / "err.txt");
    return {code, read_file(tmp_ / "err.txt")};
  }
  // The InputError message of training `r`.
  std::string train_error(const Recipe& r, const TrainOptions& options) const {
    return error_message<InputError>([&] { train(r, options); });
  }

  tf::testing::RunTempDir tmp_;
  const fs::path text_ = tmp_ / "text.txt";
  std::ostringstream sink_;
  TrainOptions quiet_;
};

void expect_has(const std::string& message, const std::string& fragment) {
  EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
}

// A misspelled command is named with the nearest one; a folder given as the recipe is refused (it
// read as an empty recipe and trained the default model).
TEST_F(Errors, MisspelledCommandAndRecipeFolderAreNamed) {
  Outcome o = run({"trian", "r.yaml"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: unknown command 'trian' (did you mean 'train'?); the commands are train, prepare, sample, fill, eval, "
                    "info, inspect, heads, prune, plot, report, export, gradcheck");
  o = run({"xyzzy"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: unknown command 'xyzzy'; the commands are");
  fs::create_directories(tmp_ / "recipes");
  tf::testing::write_file(tmp_ / "recipes" / "a.yaml", "model:\n  d_model: 32\n");
  o = run({"train", (tmp_ / "recipes").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: " + (tmp_ / "recipes").string() + ": is a folder, not a recipe file (it holds a.yaml)");
  EXPECT_FALSE(fs::exists("runs/recipes")) << "a run started";
}

TEST_F(Errors, CommandLineUsageExitsWithTwo) {
  Outcome o = run({});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "A subcommand is required");
  o = run({"train"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "recipe is required");
  o = run({"train", "r.yaml", "--bogus"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "The following argument was not expected: --bogus");
  o = run({"train", (tmp_ / "missing.yaml").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: " + (tmp_ / "missing.yaml").string() + ": cannot read the recipe file (does it exist? looked for ");
}

// The environment variable that picks the attention kernel (docs/models.md) is read at the first
// attention call: another value stops the run with exit code 2, before any checkpoint.
TEST_F(Errors, AnUnknownAttentionKernelChoiceIsRefused) {
  ASSERT_EQ(setenv("TAPEFORMER_ATTENTION", "fastest", 1), 0);  // the child inherits it
  const Outcome o = run(tf::testing::train_args("tiny_gpt", text_, tmp_ / "run", tmp_ / "cache",
                                                {"train.steps=2", "schedule.warmup_steps=1", "eval.interval=0"}));
  unsetenv("TAPEFORMER_ATTENTION");
  EXPECT_EQ(o.code, 2) << o.err;
  expect_has(o.err, "error: TAPEFORMER_ATTENTION must be naive, flash or auto, got 'fastest'");
  EXPECT_TRUE(tf::train::list_checkpoints(tmp_ / "run").empty());
}

// docs/recipes.md promises that a message about a path that is not there names the absolute path it
// looked for: a relative path starts from the folder the program runs in.
TEST_F(Errors, NotFoundMessagesNameTheAbsolutePathLookedFor) {
  const tf::testing::CwdGuard cwd(tmp_.path());
  const std::string tried = "; relative paths start from the current folder";
  expect_has(error_message<InputError>([] { load_recipe("missing.yaml"); }),
             "missing.yaml: cannot read the recipe file (does it exist? looked for " +
                 (fs::current_path() / "missing.yaml").string() + tried + ")");
  expect_has(error_message<InputError>([] { data::read_text("nowhere.txt"); }),
             "read_text: 'nowhere.txt' does not exist (looked for " + (fs::current_path() / "nowhere.txt").string() + tried);
  expect_has(error_message<InputError>([] { H5Reader reader("missing.h5"); }),
             "cannot open HDF5 file 'missing.h5': no such file (looked for " +
                 (fs::current_path() / "missing.h5").string() + tried + ")");
  expect_has(error_message<InputError>([] { read_metrics_log("run/metrics.jsonl"); }),
             "run/metrics.jsonl: cannot read the metrics log (does the run folder hold a run? looked for " +
                 (fs::current_path() / "run/metrics.jsonl").string() + tried + ")");
}

TEST_F(Errors, MissingEmptyOrTooShortTrainingTextIsNamed) {
  std::string message = train_error(recipe({"data.train_path=" + (tmp_ / "nowhere.txt").string()}), quiet_);
  expect_has(message, "data.train_path: '" + (tmp_ / "nowhere.txt").string() + "' does not exist (looked for " +
                          fs::absolute(tmp_ / "nowhere.txt").string() + "; relative paths start from the current folder)");

  fs::create_directories(tmp_ / "empty_folder");
  message = train_error(recipe({"data.train_path=" + (tmp_ / "empty_folder").string()}), quiet_);
  expect_has(message, "data.train_path: the folder '" + (tmp_ / "empty_folder").string() + "' holds no files");

  tf::testing::write_file(tmp_ / "empty.txt", "");
  message = train_error(recipe({"data.train_path=" + (tmp_ / "empty.txt").string()}), quiet_);
  expect_has(message, "data.train_path '" + (tmp_ / "empty.txt").string() + "': the training text is empty (every file of it has 0 bytes)");

  tf::testing::write_file(tmp_ / "short.txt", "Too short.");
  message = train_error(recipe({"data.train_path=" + (tmp_ / "short.txt").string()}), quiet_);
  expect_has(message, "the training text (the first 90% of data.train_path '" + (tmp_ / "short.txt").string() +
                          "') has 9 tokens, too few for one training window of data.seq_len + 1 = 33");
}

// Checked before the data is read: a run folder that cannot be created stops the run before the
// text is tokenized (no token cache is written), and a --branch folder is named by its option.
TEST_F(Errors, UnwritableRunOrCacheFolderIsNamed) {
  tf::testing::write_file(tmp_ / "a_file", "not a folder");
  const std::string a_file = (tmp_ / "a_file").string();
  std::string message = train_error(recipe({"checkpoint.dir=" + (tmp_ / "a_file" / "run").string()}), quiet_);
  expect_has(message, "checkpoint.dir '" + (tmp_ / "a_file" / "run").string() + "': cannot create the folder: '" +
                          a_file + "' is a file, not a folder");
  EXPECT_FALSE(fs::exists(tmp_ / "cache")) << "the text was tokenized before the refusal";
  message = train_error(recipe({"data.cache_dir=" + (tmp_ / "a_file" / "cache").string()}), quiet_);
  expect_has(message, "data.cache_dir '" + (tmp_ / "a_file" / "cache").string() + "': cannot create the folder: '" +
                          a_file + "' is a file, not a folder");
  EXPECT_FALSE(fs::exists(tmp_ / "run")) << "the run started";

  train(recipe({}), quiet_);
  const Outcome o = run({"train", (tmp_ / "run" / "recipe.yaml").string(), "--resume", "--branch", a_file});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: train --branch '" + a_file + "' is a file; expected a folder (created when missing)");
}

TEST_F(Errors, DamagedTokenizerFormsAreNamed) {
  expect_has(error_message<InputError>([] { data::Tokenizer::from_string("something else"); }),
             "tokenizer: unknown serialised form, header 'something else'");
  expect_has(error_message<InputError>([] {
               data::Tokenizer::from_string("tapeformer-tokenizer bpe 1\npretokenizer gpt2-classes\nmerges 1\n300 1\n"
                                            "specials 0\n");
             }),
             "BpeTokenizer: merge 0 (300, 1) uses an id not defined before it (< 256)");
  expect_has(error_message<InputError>(
                 [] { data::Tokenizer::from_string("tapeformer-tokenizer char 1\ncode_points 2\nU+0041\n"); }),
             "CharTokenizer: serialised form lists 2 code points but has 1 lines left");
}

TEST_F(Errors, UnsupportedCheckpointFormatIsNamed) {
  train(recipe({}), quiet_);
  const fs::path file = checkpoint_path(tmp_ / "run", 2);
  const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(id, 0);
  const hid_t attr = H5Aopen(id, "format_version", H5P_DEFAULT);
  const int64_t future = 2;
  ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &future), 0);
  H5Aclose(attr);
  H5Fclose(id);
  reseal_hdf5_file(file.string());  // as a newer tapeformer would have sealed it
  const Outcome o = run({"info", file.string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: " + file.string() + ": checkpoint format 2 is not supported (this build reads format 1)");
}

TEST_F(Errors, ResumeWithoutACheckpointSaysHowToNameOne) {
  TrainOptions resume = quiet_;
  resume.resume = "";
  const std::string message = train_error(recipe({}), resume);
  expect_has(message, "--resume: no checkpoint in the run folder " + (tmp_ / "run").string() +
                          " (name one: --resume runs/x/ckpt_00000500.h5)");
}

TEST_F(Errors, AnomalyModeNamesTheOpTheLayerAndTheStep) {
  // As Trainer.NanWeightStopsAtTheLossCheck, with train.anomaly on: the forward pass stops at the
  // first op whose output holds the NaN, before any loss is computed.
  train(recipe({"checkpoint.interval=1"}), quiet_);
  const fs::path file = checkpoint_path(tmp_ / "run", 2);
  TrainOptions resume = quiet_;
  resume.resume = "";
  resume.accept_changes = true;  // train.steps 2 -> 4 and train.anomaly on
  resume.before_training = [](tf::train::Run& run) {
    for (const auto& p : run.params)
      if (p.name == "ln_f.weight") p.tensor.data<float>()[0] = std::nanf("");
  };
  const std::string message = train_error(recipe({"train.steps=4", "train.anomaly=true"}), resume);
  // ln_f's scale is NaN: layer_norm in ln_f is the first op with a NaN in its output.
  EXPECT_EQ(message.rfind("step 3: anomaly: op 'layer_norm' in layer 'ln_f' (op ", 0), 0u) << message;
  expect_has(message, "of the forward pass) produced nan");
  expect_has(message, "; stopping (no checkpoint of this state is written)");
  EXPECT_EQ(latest_checkpoint(tmp_ / "run"), file);
  // The same through the program's --anomaly flag, on a run that diverges (plain SGD at lr 10 from
  // weights of std 1, no clipping: as Trainer.NonFiniteLossStopsNamingTheStepWithoutItsCheckpoint).
  const Outcome o = run({"train", (tmp_ / "run" / "recipe.yaml").string(), "--anomaly", "--overwrite", "--set",
                         "optim.name=sgd", "--set", "optim.lr=10", "--set", "optim.momentum=0.9", "--set",
                         "optim.weight_decay=0", "--set", "schedule.kind=constant", "--set", "schedule.warmup_steps=0",
                         "--set", "train.grad_clip=0", "--set", "model.init_std=1.0",
                         "--set", "train.steps=200", "--set", "eval.interval=0"});
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(std::regex_search(o.err, std::regex("error: step [0-9]+: anomaly: (the backward of )?op '[a-z_]+' in layer '")))
      << o.err;
}

// eval, heads and prune read the checkpoint's validation split by default; when its text is not here,
// the error ends with the command's own way out (--text), not only the recipe's data keys, which
// these commands cannot change.
TEST_F(Errors, AMissingValidationSplitPointsToText) {
  train(recipe({}), quiet_);
  const fs::path gpt = checkpoint_path(tmp_ / "run", 2);
  fs::remove(text_);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", gpt.string()}, {"heads", gpt.string()},
        {"prune", gpt.string(), "--heads", "0.5", "--out", (tmp_ / "pruned.h5").string()}}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, 2) << args[0];
    expect_has(o.err, "data.train_path: '" + text_.string() + "' does not exist");
    expect_has(o.err, "; the validation split of " + gpt.string() + "'s recipe is not here: give a text with --text FILE");
  }
}

TEST_F(Errors, SamplingAndEvaluationRefuseBadRequests) {
  train(recipe({}, "tiny_bert"), quiet_);
  const fs::path bert = checkpoint_path(tmp_ / "run", 2);
  Outcome o = run({"sample", bert.string(), "--tokens", "3"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: " + bert.string() + ": sampling needs a GPT checkpoint; this one holds a BERT");

  fs::remove_all(tmp_ / "run");
  train(recipe({}), quiet_);
  const fs::path gpt = checkpoint_path(tmp_ / "run", 2);
  o = run({"sample", gpt.string(), "--prompt", "", "--tokens", "3"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: sample: the prompt is empty; give at least one token to continue");
  o = run({"sample", gpt.string(), "--temperature", "-1"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--temperature: must be a number in [0, 1000], got -1");
  EXPECT_LT(o.err.size(), 200u) << o.err;
  // Every numeric flag has a range and refuses text that does not parse whole: no allocation of a
  // trillion tokens, no seed that wraps around, no probability mass of 0.
  for (const auto& [flag, value, said] :
       {std::tuple{"--tokens", "1000000000000", "--tokens: must be an integer in [0, 1000000], got 1000000000000"},
        std::tuple{"--tokens", "9223372036854775807", "--tokens: must be an integer in [0, 1000000]"},
        std::tuple{"--tokens", "12abc", "--tokens: must be an integer in [0, 1000000], got 12abc"},
        std::tuple{"--seed", "-1", "--seed: must be an integer in [0, 18446744073709551615], got -1"},
        std::tuple{"--seed", "18446744073709551616", "--seed: must be an integer in [0, 18446744073709551615]"},
        std::tuple{"--top-p", "0", "--top-p: must be a number in (0, 1], got 0"},
        std::tuple{"--top-k", "-3", "--top-k: must be an integer in [0, 1073741824], got -3"},
        std::tuple{"--temperature", "inf", "--temperature: must be a number in [0, 1000], got inf"}}) {
    o = run({"sample", gpt.string(), flag, value});
    EXPECT_EQ(o.code, 2) << flag << " " << value;
    expect_has(o.err, said);
    EXPECT_EQ(o.err.find(" The"), std::string::npos) << "the prompt was printed before the error";
  }
  o = run({"eval", gpt.string(), "--batches", "-1"});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "--batches: must be an integer in [0, 1099511627776], got -1");

  tf::testing::write_file(tmp_ / "one.txt", "a");
  o = run({"eval", gpt.string(), "--text", (tmp_ / "one.txt").string()});
  EXPECT_EQ(o.code, 2);
  expect_has(o.err, "error: the text is too short to evaluate (1 tokens)");
}

// docs/errors.md names, for each error, the test that asserts its message as
// `tests/<folder>/<file>_test.cpp:Suite.Name`; every row of its tables names one, and each exists.
TEST(ErrorsDoc, EveryEntryNamesATestThatExists) {
  const std::string doc = read_file(tf::testing::source_path("docs/errors.md"));
  ASSERT_FALSE(doc.empty());
  const std::regex reference(R"((tests/[a-z0-9_/]+_test\.cpp):([A-Za-z0-9_]+)\.([A-Za-z0-9_]+))");
  int rows = 0, references = 0;
  std::set<std::string> missing;
  std::istringstream lines(doc);
  bool in_errors_table = false;  // the tables whose header starts "| message"
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| message", 0) == 0) in_errors_table = true;
    if (line.rfind("|", 0) != 0) in_errors_table = false;
    const bool row = in_errors_table && line.rfind("| message", 0) != 0 && line.rfind("|---", 0) != 0;
    bool named = false;
    for (std::sregex_iterator it(line.begin(), line.end(), reference), end; it != end; ++it) {
      named = true;
      ++references;
      const std::string file = (*it)[1], suite = (*it)[2], name = (*it)[3];
      const std::string source = read_file(tf::testing::source_path(file));
      const std::regex test(R"(TEST(_F|_P)?\(\s*)" + suite + R"(\s*,\s*)" + name + R"(\s*\))");
      if (!std::regex_search(source, test)) missing.insert(file + ":" + suite + "." + name);
    }
    if (row) {
      ++rows;
      EXPECT_TRUE(named) << "a row of docs/errors.md names no test: " << line;
    }
  }
  EXPECT_TRUE(missing.empty()) << "docs/errors.md names tests that do not exist: " << [&] {
    std::string all;
    for (const auto& m : missing) all += "\n  " + m;
    return all;
  }();
  EXPECT_GT(rows, 30) << "docs/errors.md lost its tables?";
  EXPECT_GE(references, rows);
}

}  // namespace
}  // namespace tf::train

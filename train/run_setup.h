// The training run's setup, before its first step (train/trainer.cpp calls these in order): the
// command line's combinations, where the run starts (a checkpoint to resume or fine-tune), the
// corpus as token shards, whether the run fits in memory, the dry run's plan, the run folder's
// files and the first lines printed.
#pragma once
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

#include "data/prepare.h"
#include "framework/dist/comm.h"
#include "train/plan.h"
#include "train/run.h"
#include "train/run_folder.h"
#include "train/run_history.h"
#include "train/trainer.h"

namespace tf::train {

// Where the validation and training texts came from, for messages.
std::string validation_source(const DataConfig& d);
std::string training_source(const DataConfig& d);
// Both texts must hold one window of data.seq_len + 1 tokens (checked on the token counts).
void check_token_counts(const Recipe& r, size_t train_tokens, size_t val_tokens);
// The command line's combinations that make no sense, before anything is read.
void check_train_options(const Recipe& given, const Recipe& recipe, const TrainOptions& options, int ranks);

// Where a run starts: a checkpoint it resumes (and the folder's history past it), or one whose
// weights it fine-tunes, or neither.
struct StartingPoint {
  std::optional<std::filesystem::path> resume_from, init_from;
  std::optional<LaterHistory> later;  // this run's history in the folder past the resume step
};
StartingPoint starting_point(const Recipe& given, const Recipe& recipe, const TrainOptions& options, std::ostream& out);

// The corpus as token shards (rank 0 prepares, the others map).
data::PreparedCorpus prepare_training_data(const Recipe& recipe, const StartingPoint& start, bool dry_run,
                                           dist::Comm& comm, dist::SetupAgreement& setup, std::ostream& out);
// Why the run cannot fit this machine's memory, or "" when it can.
std::string too_large_for_memory(const RunPlan& plan);
// train --dry-run: prints the plan, then refuses (exit 2) what train would refuse.
void dry_run(const Recipe& recipe, const Recipe& planned, const RunPlan& plan, const data::PreparedCorpus& corpus,
             const std::string& corpus_text, int threads, const std::string& too_large, bool refuses_folder,
             const RunFolderContents& earlier, std::ostream& out);
// Rank 0's run-folder files: returns metrics.jsonl open for appending, sets recipe_file.
std::ofstream open_run_files(const Run& run, const StartingPoint& start, const TrainOptions& options,
                             FilesBeforeFirstCheckpoint& new_files, std::filesystem::path& recipe_file, std::ostream& out);
// The run's first lines: model, size, processes, data, and where it starts from.
void print_run_header(const Run& run, const RunPlan& plan, int threads, int ranks, const std::string& corpus_text,
                      const StartingPoint& start, const TrainOptions& options, std::ostream& out);

}  // namespace tf::train

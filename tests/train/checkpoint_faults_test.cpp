// Checkpoints as untrusted input, and saving onto a failing disk. A real checkpoint of a tiny GPT
// is altered with the HDF5 C API (a parameter of the wrong dtype or rank or a forged huge shape,
// a missing dataset, a forged tokenizer or recipe size, an optimizer slot of the wrong shape) or
// with a byte editor (truncation, a bit flip in a parameter's header): each load is an InputError
// naming the file, the dataset and what was wrong, and the CLI exits with 2. A checkpoint save
// that hits a file size limit exits with 2 naming the file and the reason, keeps the previous
// checkpoint bit for bit and leaves no ".partial" file; --resume then finishes the run.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>

#include "framework/io/hdf5_io.h"
#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/run_fixture.h"
#include "train/trainer.h"

namespace tf::train {
namespace {

namespace fs = std::filesystem;
using tf::testing::error_message;
using tf::testing::read_file;

constexpr const char* kParam = "blocks.0.attn.qkv.weight";  // (96, 32) f32 in tiny_gpt

class CheckpointFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    tf::testing::write_file(text_, tf::testing::english_text(3000));
    quiet_.out = &sink_;
    train(tf::testing::tiny_recipe("tiny_gpt", text_, tmp_ / "run", tmp_ / "cache",
                                   {"train.steps=2", "schedule.warmup_steps=1", "eval.interval=0"}),
          quiet_);
    ASSERT_TRUE(fs::exists(good_));
  }

  // A copy of the good checkpoint, changed by `edit(file id)` through the HDF5 C API.
  fs::path altered(const std::string& name, const std::function<void(hid_t)>& edit) {
    const fs::path file = tmp_ / (name + ".h5");
    fs::copy_file(good_, file, fs::copy_options::overwrite_existing);
    const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(id, 0);
    edit(id);
    H5Fclose(id);
    reseal_hdf5_file(file.string());  // a forged file with a valid integrity header: the reader's checks decide
    return file;
  }

  tf::testing::RunTempDir tmp_;
  const fs::path text_ = tmp_ / "text.txt";
  const fs::path good_ = checkpoint_path(tmp_ / "run", 2);
  std::ostringstream sink_;
  TrainOptions quiet_;
};

// Replaces the dataset at `path` with one of `type` and `dims`; chunked and never written, so
// nothing is stored for it however large it claims to be.
void replace_dataset(hid_t file, const std::string& path, hid_t type, std::vector<hsize_t> dims) {
  ASSERT_GE(H5Ldelete(file, path.c_str(), H5P_DEFAULT), 0) << path;
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  std::vector<hsize_t> chunk(dims.size(), 1);
  H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds = H5Dcreate2(file, path.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << path;
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void expect_mentions(const std::string& message, const std::vector<std::string>& fragments) {
  for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
}

TEST_F(CheckpointFaults, ParameterOfTheWrongDtypeOrRankIsNamed) {
  const fs::path f64 = altered("f64", [](hid_t f) { replace_dataset(f, std::string("/model/") + kParam, H5T_IEEE_F64LE, {96, 32}); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(f64); }),
                  {f64.string(), "does not match the model", std::string("parameter '") + kParam + "' is (96, 32) f64 in the checkpoint but (96, 32) f32"});

  const fs::path flat = altered("flat", [](hid_t f) { replace_dataset(f, std::string("/model/") + kParam, H5T_IEEE_F32LE, {96 * 32}); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(flat); }),
                  {flat.string(), std::string("parameter '") + kParam + "' is (3072,) f32 in the checkpoint but (96, 32) f32"});

  // A stored type with no tensor dtype at all (64-bit integers) is refused by the reader itself.
  const fs::path ints = altered("ints", [](hid_t f) { replace_dataset(f, std::string("/model/") + kParam, H5T_STD_I64LE, {96, 32}); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(ints); }),
                  {ints.string(), std::string("dataset '/model/") + kParam + "'", "found signed 64-bit integer"});
}

// A checkpoint of a diverged run (a NaN in a weight, an infinity in Adam's state) with a valid integrity
// header: loading names the tensor and the element, and the program exits 2, for eval and sample too.
TEST_F(CheckpointFaults, NonFiniteWeightsOrOptimizerStateAreNamed) {
  LoadedRun nan_weight = load_checkpoint(good_);
  for (auto& p : nan_weight.run.params)
    if (p.name == "blocks.0.attn.qkv.weight") p.tensor.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  const fs::path file = tmp_ / "nan.h5";
  save_checkpoint(nan_weight.run, nan_weight.batches, file);
  expect_mentions(error_message<InputError>([&] { load_checkpoint(file); }),
                  {file.string(), "parameter 'blocks.0.attn.qkv.weight' holds nan at element 17",
                   "a diverged run: resume from an earlier checkpoint"});
  for (const char* command : {"eval", "sample", "info"}) {
    const int code = tf::testing::run_tapeformer({command, file.string()}, tmp_ / "out", tmp_ / "err");
    EXPECT_EQ(code, 2) << command;
    expect_mentions(read_file(tmp_ / "err"), {"holds nan at element 17"});
  }

  LoadedRun inf_state = load_checkpoint(good_);
  optim::OptimizerState state = inf_state.run.optimizer->state();
  Tensor& slot = state.params.at("ln_f.weight").slots.at("exp_avg_sq");
  slot.data<float>()[3] = std::numeric_limits<float>::infinity();
  inf_state.run.optimizer->load_state(state);
  const fs::path file2 = tmp_ / "inf.h5";
  save_checkpoint(inf_state.run, inf_state.batches, file2);
  expect_mentions(error_message<InputError>([&] { load_checkpoint(file2); }),
                  {file2.string(), ": /optimizer: state 'exp_avg_sq' of parameter 'ln_f.weight' holds inf at element 3"});
}

TEST_F(CheckpointFaults, ForgedHugeShapesAreRefusedBeforeAllocating) {
  const fs::path huge = altered("huge", [](hid_t f) {
    replace_dataset(f, std::string("/model/") + kParam, H5T_IEEE_F32LE, {uint64_t{1} << 20, uint64_t{1} << 20});
  });
  ASSERT_LT(fs::file_size(huge), fs::file_size(good_) + 64 * 1024);
  std::string message = error_message<InputError>([&] { load_checkpoint(huge); });
  expect_mentions(message, {huge.string(), std::string("/model/") + kParam, "(1048576, 1048576)", "2^31"});

  // The tokenizer and recipe texts: a forged size beyond the file, and a real one beyond the cap.
  const fs::path tokenizer = altered("tokenizer", [](hid_t f) { replace_dataset(f, "/tokenizer", H5T_STD_U8LE, {uint64_t{1} << 30}); });
  message = error_message<InputError>([&] { checkpoint_tokenizer(tokenizer); });
  expect_mentions(message, {tokenizer.string(), "'/tokenizer'", "needs 1073741824 bytes but the file has only"});

  const fs::path recipe = altered("recipe", [](hid_t f) {
    ASSERT_GE(H5Ldelete(f, "/recipe", H5P_DEFAULT), 0);
    const std::string text((1 << 20) + 1, '#');
    const hsize_t n = text.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(f, "/recipe", H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), 0);
    H5Dclose(ds);
    H5Sclose(space);
  });
  message = error_message<InputError>([&] { load_checkpoint(recipe); });
  expect_mentions(message, {recipe.string(), "'/recipe'", "declares 1048577 bytes, more than the 1048576 allowed"});
}

TEST_F(CheckpointFaults, MissingDatasetsAndMisshapenStateAreNamed) {
  const fs::path no_rng = altered("no_rng", [](hid_t f) { ASSERT_GE(H5Ldelete(f, "/rng/dropout", H5P_DEFAULT), 0); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(no_rng); }),
                  {no_rng.string(), "dataset '/rng/dropout'", "not found (no member 'dropout')"});

  const fs::path no_param = altered("no_param", [](hid_t f) { ASSERT_GE(H5Ldelete(f, (std::string("/model/") + kParam).c_str(), H5P_DEFAULT), 0); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(no_param); }),
                  {no_param.string(), std::string("missing parameter '") + kParam + "' (96, 32)"});

  const fs::path rng_2d = altered("rng_2d", [](hid_t f) { replace_dataset(f, "/rng/dropout", H5T_STD_U64LE, {1, 2}); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(rng_2d); }),
                  {rng_2d.string(), "dataset '/rng/dropout'", "expected rank at most 1, found rank 2"});

  const fs::path batches = altered("batches", [](hid_t f) { replace_dataset(f, "/data/train_batches", H5T_STD_U64LE, {2}); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(batches); }),
                  {batches.string(), "/data/train_batches must hold 3 values, found 2"});

  const fs::path slot = altered("slot", [](hid_t f) {
    replace_dataset(f, std::string("/optimizer/") + kParam + "/exp_avg", H5T_IEEE_F32LE, {32, 96});
  });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(slot); }),
                  {slot.string(), "/optimizer", std::string("state of '") + kParam + "': slot 'exp_avg' is", "(32, 96)"});

  const fs::path no_format = altered("no_format", [](hid_t f) { ASSERT_GE(H5Adelete(f, "format_version"), 0); });
  expect_mentions(error_message<InputError>([&] { load_checkpoint(no_format); }),
                  {no_format.string(), "not a tapeformer checkpoint (no format_version attribute)"});
}

// The byte offset of a dataset's object header, from the C API (its addresses count from the end
// of the user block that holds the integrity header).
haddr_t header_of(const fs::path& file, const std::string& path) {
  const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5O_info_t info{};
  EXPECT_GE(H5Oget_info_by_name2(id, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT), 0) << path;
  const hid_t fcpl = H5Fget_create_plist(id);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl, &userblock);
  H5Pclose(fcpl);
  H5Fclose(id);
  return info.addr + userblock;
}

TEST_F(CheckpointFaults, TruncatedOrBitFlippedFilesAreRefusedAndTheCliExitsWithTwo) {
  const std::string bytes = read_file(good_);
  const fs::path truncated = tmp_ / "truncated.h5";
  tf::testing::write_file(truncated, bytes.substr(0, bytes.size() / 2));
  expect_mentions(error_message<InputError>([&] { load_checkpoint(truncated); }), {truncated.string()});

  // One bit of the dimensions' neighbourhood in the parameter's header: the integrity header's
  // checksum catches it before HDF5 reads the file (every bit of a header, and raw data:
  // tests/framework/io/hdf5_integrity_test.cpp; without the integrity header: hdf5_faults_test.cpp).
  const haddr_t header = header_of(good_, std::string("/model/") + kParam);
  ASSERT_EQ(bytes.substr(header, 4), "OHDR");
  std::string flipped_bytes = bytes;
  flipped_bytes[header + 40] = static_cast<char>(flipped_bytes[header + 40] ^ 0x10);
  const fs::path flipped = tmp_ / "flipped.h5";
  tf::testing::write_file(flipped, flipped_bytes);
  expect_mentions(error_message<InputError>([&] { load_checkpoint(flipped); }),
                  {flipped.string(), "checksum mismatch", "altered or damaged after it was written"});

  // Through the program: `sample` and `eval` on the damaged files exit with 2 and say why.
  for (const fs::path& file : {truncated, flipped}) {
    const int code = tf::testing::run_tapeformer({"sample", file.string(), "--tokens", "4"}, tmp_ / "out.txt",
                                                 tmp_ / "err.txt");
    const std::string err = read_file(tmp_ / "err.txt");
    EXPECT_EQ(code, 2) << err;
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
    EXPECT_NE(err.find(file.string()), std::string::npos) << err;
    // One line: HDF5's teardown, which would complain about a header it leaked, is skipped.
    EXPECT_EQ(err.find('\n'), err.size() - 1) << err;
  }
}

// Exit code 2, not 1: the disk, not tapeformer, is at fault, and the message says what to do.
TEST_F(CheckpointFaults, AFullDiskDuringSaveExitsWithTwoAndKeepsThePreviousCheckpoint) {
  const fs::path dir = tmp_ / "run";
  const std::string before = read_file(good_);
  const auto args = tf::testing::train_args("tiny_gpt", text_, dir, tmp_ / "cache",
                                            {"train.steps=3", "schedule.warmup_steps=1", "eval.interval=0",
                                             "checkpoint.interval=1"});
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  resume.push_back("--accept-changes");  // 2 steps and checkpoint.interval 1 -> 3 steps, a checkpoint every step
  // Half a checkpoint: step 3 trains, and its checkpoint cannot be written.
  const int code = tf::testing::run_tapeformer(resume, tmp_ / "full.out", tmp_ / "full.err", {}, before.size() / 2);
  const std::string err = read_file(tmp_ / "full.err");
  const fs::path third = checkpoint_path(dir, 3);
  EXPECT_EQ(code, 2) << err;
  expect_mentions(err, {"error: cannot save checkpoint '" + third.string() + "': cannot write '" + third.string() +
                            ".partial': " + std::strerror(EFBIG),
                        "the newest complete checkpoint, '" + good_.string() + "', is kept",
                        "then continue with --resume"});
  EXPECT_EQ(err.find("internal error"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(third));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".partial") << e.path();
  EXPECT_EQ(read_file(good_), before) << "the previous checkpoint changed";
  EXPECT_EQ(load_checkpoint(good_).run.step, 2);

  // With the disk freed, --resume continues from step 2 and finishes.
  ASSERT_EQ(tf::testing::run_tapeformer(resume, tmp_ / "resume.out", tmp_ / "resume.err"), 0)
      << read_file(tmp_ / "resume.err");
  EXPECT_NE(read_file(tmp_ / "resume.out").find("resuming from " + good_.string() + " at step 2"), std::string::npos);
  EXPECT_EQ(load_checkpoint(third).run.step, 3);
}

}  // namespace
}  // namespace tf::train

// Fuzz target: the checkpoint loader on arbitrary, truncated and bit-flipped HDF5 files — the
// generic reader (framework/hdf5_io.h H5Reader) and the run loader (train/checkpoint.h).
//
// Input: the bytes of a file. HDF5 reads from a path, and H5Reader checks the path and the file's
// size itself, so each run writes the input to one scratch file (per process) and opens that.
// Expected: success or tf::InputError; anything else is a finding.
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "framework/hdf5_io.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint.h"

namespace {

using namespace tf;
namespace fs = std::filesystem;

const fs::path& scratch_file() {
  static const fs::path path = [] {
    const fs::path p = fs::temp_directory_path() / ("tapeformer_checkpoint_fuzz_" + std::to_string(::getpid()) + ".h5");
    std::atexit([] { std::error_code ignored; fs::remove(scratch_file(), ignored); });
    return p;
  }();
  return path;
}

// Walks every group and reads every dataset and attribute the generic reader is asked about,
// as `tapeformer info` and the optimizer-state loader do.
void walk(const H5Reader& in, const std::string& group, int depth) {
  if (depth > 4) return;
  for (const std::string& name : in.list(group)) {
    const std::string path = group == "/" ? "/" + name : group + "/" + name;
    fuzz::refused_ok([&] { in.list(path); walk(in, path, depth + 1); });
    fuzz::refused_ok([&] { in.read_tensor(group, name); });
    fuzz::refused_ok([&] { in.read_u64(group, name); });
    fuzz::refused_ok([&] { in.read_bytes(group, name); });
    fuzz::refused_ok([&] { in.read_attr(path, "step"); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  omp_set_num_threads(1);  // model initialisation must not compete for the shared cores
  const fs::path& file = scratch_file();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }

  fuzz::refused_ok([&] {
    const H5Reader in(file.string());
    for (const char* key : {"format_version", "step", "tokens_seen", "created", "writer"})
      fuzz::refused_ok([&] { in.read_attr("/", key); });
    walk(in, "/", 0);
  });
  fuzz::refused_ok([&] { train::checkpoint_recipe(file); });
  fuzz::refused_ok([&] { train::checkpoint_tokenizer(file); });
  fuzz::refused_ok([&] { train::load_checkpoint(file); });
  return 0;
}

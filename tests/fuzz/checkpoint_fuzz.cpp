// Fuzz target: the checkpoint loader on arbitrary, truncated and bit-flipped HDF5 files — the
// generic reader (framework/io/hdf5_io.h H5Reader) and the run loader (train/checkpoint.h).
//
// Input: the bytes of a file. HDF5 reads from a path, and H5Reader checks the path and the file's
// size itself, so each run writes the input to one scratch file (per process) and opens that.
// Expected: success or tf::InputError; anything else is a finding.
//
// The reader runs as shipped: integrity header checked, the file probed in a child process
// (framework/io/hdf5_io.h), which contains libhdf5's own crashes and hangs and refuses a file as soon
// as HDF5 fails on any part of it; what libFuzzer explores in this process is then our reader's
// own checks (names, types, ranks, sizes) and the loaders above it. A mutated sealed file almost
// never keeps its checksum, so an input whose HDF5 data starts at byte 512 is also resealed and
// read again: a forged file with a valid header, which is why the probe runs for sealed files too.
// TAPEFORMER_HDF5_PROBE=0 runs HDF5 in this process only, to explore the reader's handling of
// HDF5's errors as well (libhdf5's own faults are then findings again: the hdf5_*.h5 seeds crash).
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "framework/io/hdf5_io.h"
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
// as `tapeformer info` and the optimizer-state loader do. At most `budget` members in all: a
// damaged group that lists itself among its members (hdf5_link_lookup_hang.h5) would otherwise
// make a depth-limited walk exponential (seconds in a release build, past libFuzzer's timeout
// under AddressSanitizer), which is the harness's cost, not the reader's.
void walk(const H5Reader& in, const std::string& group, int depth, int& budget) {
  if (depth > 4) return;
  for (const std::string& name : in.list(group)) {
    if (--budget < 0) return;
    const std::string path = group == "/" ? "/" + name : group + "/" + name;
    fuzz::refused_ok([&] { in.list(path); walk(in, path, depth + 1, budget); });
    fuzz::refused_ok([&] { in.read_tensor(group, name); });
    fuzz::refused_ok([&] { in.read_u64(group, name); });
    fuzz::refused_ok([&] { in.read_bytes(group, name); });
    fuzz::refused_ok([&] { in.read_attr(path, "step"); });
  }
}

// The probe's deadline, well under libFuzzer's -timeout=10 (tests/fuzz/run.sh), so that a hang
// inside HDF5 is a refusal, not a timeout of the whole process.
const bool probe_configured = [] {
  Hdf5ProbeOptions o = hdf5_probe_options();
  o.base_seconds = 2;
  set_hdf5_probe_options(o);
  return true;
}();

void exercise(const fs::path& file) {
  bool opened = false;
  fuzz::refused_ok([&] {
    const H5Reader in(file.string());
    opened = true;
    for (const char* key : {"format_version", "step", "tokens_seen", "created", "writer"})
      fuzz::refused_ok([&] { in.read_attr("/", key); });
    int budget = 256;  // the seed gpt_valid.h5 has 72
    walk(in, "/", 0, budget);
  });
  // The loaders open the file with H5Reader first: refused there, they would refuse it the same
  // way (and a hang would cost each of them the probe's deadline).
  if (!opened) return;
  fuzz::refused_ok([&] { train::checkpoint_recipe(file); });
  fuzz::refused_ok([&] { train::checkpoint_tokenizer(file); });
  fuzz::refused_ok([&] { train::load_checkpoint(file); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  omp_set_num_threads(1);  // model initialisation must not compete for the shared cores
  (void)probe_configured;
  const fs::path& file = scratch_file();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  exercise(file);
  const std::string_view signature("\x89HDF\r\n\x1a\n", 8);
  if (size >= 520 && fuzz::as_text(data, size).substr(512, 8) == signature &&
      fuzz::refused_ok([&] { reseal_hdf5_file(file.string()); }))
    exercise(file);
  return 0;
}

// Internals shared by the HDF5 writer (hdf5_io.cpp), reader (hdf5_reader.cpp), integrity header
// (hdf5_integrity.cpp) and probe (hdf5_probe.cpp): path handling, type names, the error capture
// that makes HDF5's failures readable, the reader's limits. Not a public header: only those files
// and the tests of the header and the probe include it.
#pragma once
#include <H5Cpp.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/tensor.h"

namespace tf::hdf5 {

// Installs the error handler below (once); every H5Writer and H5Reader calls it first.
void init();

// "H5Dopen2 failed (incorrect metadata checksum after all read tries)": the exception's message
// and the innermost cause HDF5 reported for it (see hdf5_io.cpp), which it then forgets.
std::string detail(const H5::Exception& e);
std::string detail(const std::string& what);  // the same for a failed C API call: "H5Fopen failed (...)"
void forget_cause();  // before an operation, so that an old cause is not reported with a new error

std::vector<std::string> split_path(const std::string& path);
std::string normalize(const std::string& group);  // "/a/b" for "a/b", "/a/b/" and "/a//b"; "/" for ""
std::string join(const std::string& group, const std::string& name);
// True when a group or dataset exists at `path`; walks the path, because HDF5 fails rather than
// answering false when an intermediate group is missing.
bool exists(const H5::H5File& file, const std::string& path);

std::string describe_type(hid_t type);  // "32-bit float", "unsigned 8-bit integer", "string"
const H5::PredType& file_type(DType d);
const H5::PredType& memory_type(DType d);

// What the reader accepts, checked before anything is allocated (hdf5_reader.cpp): elements a
// dataset may declare (2^31: far above any tensor we train), bytes of a string attribute (ours are
// words and dates). The probe applies the same limits, so it reads what the reader would read.
constexpr uint64_t kMaxElements = uint64_t{1} << 31;
constexpr uint64_t kMaxAttrString = 64 * 1024;
// The 4-byte opaque type to which HDF5 converts a variable-length string's length field (Note
// [variable-length string length] in hdf5_reader.cpp); registered on first use.
hid_t vlen_length_type();

// ---------------------------------------------------------------------------------------------
// Integrity header (hdf5_integrity.cpp; Note [integrity header] in hdf5_io.h)

constexpr size_t kHeaderBytes = 512;  // the HDF5 user block that holds it; the HDF5 data follows

// Fills bytes [0, 512) of `file`, a whole file image of `size` bytes whose HDF5 data starts at 512.
void write_integrity_header(char* file, size_t size);

// Verifies the integrity header of the open file `fd` (`path`, `size` bytes), streaming it in
// chunks, before HDF5 reads anything of it; InputError naming the file on any mismatch. Returns
// the crc32 of the bytes after the header, or for a file without the header (its HDF5 data starts
// at byte 0: older checkpoints, h5py files) of the whole file, by which the probe knows it again.
uint32_t verify_integrity(int fd, const std::string& path, uint64_t size);

// ---------------------------------------------------------------------------------------------
// Probe (hdf5_probe.cpp; Note [probing in a child process] in hdf5_io.h)

// Where a probe child keeps the step it is on: a page shared with the parent, written without a
// system call (a pipe write per step woke the parent for each one, most of the probe's time on a
// checkpoint of 200 objects). Two slots, so that a child dying mid-copy leaves the last complete
// step readable.
struct ProbeSteps {
  std::atomic<uint32_t> latest{0};  // the slot holding the latest complete step
  char slot[2][1024] = {};
};

// What a probe child tells its parent: its steps through the shared page, its end (done, or HDF5
// refusing to open the file) through a pipe, one line per record.
class ProbeReport {
 public:
  ProbeReport(int fd, ProbeSteps& steps) : fd_(fd), steps_(steps) {}
  void step(const std::string& what);           // about to do `what`; the last one names a crash
  void cannot_open(const std::string& reason);  // HDF5 refused to open the file (not a crash)
  void damaged(const std::string& where_and_reason);  // "dataset '/w': H5Dopen2 failed (...)"
  void done();                                  // walked the whole file

 private:
  void send(char kind, const std::string& text);
  int fd_;
  ProbeSteps& steps_;
};
using ProbeWalk = void (*)(ProbeReport& report, const std::string& path, uint64_t size);

// Runs walk(path) in a forked child and waits at most `seconds` for it. Returns when the child
// reported done(); an InputError naming the file when HDF5 could not open it or failed on a part
// of it, or the child was killed by a signal, exited otherwise, or ran past the deadline (and was
// killed).
void run_in_child(const std::string& path, uint64_t size, double seconds, ProbeWalk walk);

// A file as it was when H5Reader checked it: device, inode, size, modification and change times,
// and the crc32 verify_integrity returned. The probe remembers the last few that passed it and
// does not probe them again while all of this is unchanged (load_checkpoint opens a checkpoint
// three times, `tapeformer info` four): the probe's verdict depends on the bytes alone.
struct CheckedFile {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint32_t crc = 0;
  bool operator==(const CheckedFile&) const = default;
};

// The probe H5Reader runs (when enabled): run_in_child with the walk of every group, dataset and
// attribute, and the deadline of Hdf5ProbeOptions; skipped for a file that passed it before.
void probe(const std::string& path, const CheckedFile& file);

// Calls f(H5::H5Object&) on the group or dataset at `path`, which must exist.
template <class F>
void with_object(const H5::H5File& file, const std::string& path, F&& f) {
  const std::string p = normalize(path);
  if (p != "/" && exists(file, p) && file.childObjType(p) == H5O_TYPE_DATASET) {
    H5::DataSet ds = file.openDataSet(p);
    f(static_cast<H5::H5Object&>(ds));
    return;
  }
  H5::Group g = file.openGroup(p);
  f(static_cast<H5::H5Object&>(g));
}

}  // namespace tf::hdf5

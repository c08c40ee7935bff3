// Named tensors, byte strings and attributes <-> HDF5 groups and datasets: the storage layer of
// checkpoints. Files are plain HDF5 (1.8-compatible), so h5py and h5dump read them directly.
//
// Names: a group is a '/'-separated path ("model", "/optimizer/state"; "" and "/" are the root);
// a dataset name is one HDF5 link name and may contain dots, so PyTorch parameter paths are kept
// whole: write_tensor("model", "blocks.0.attn.qkv.weight", w) creates the dataset
// /model/blocks.0.attn.qkv.weight, which h5py shows as f['model']['blocks.0.attn.qkv.weight'].
//
// Stored types: f32 -> IEEE_F32LE, f64 -> IEEE_F64LE, i32 -> STD_I32LE, u64 (RNG state) ->
// STD_U64LE, bytes -> a 1-D STD_U8LE dataset (h5py: bytes(f['recipe'][()])), attributes -> a
// scalar variable-length UTF-8 string, STD_I64LE or IEEE_F64LE. A 0-d tensor is a scalar dataspace.
//
// Reading treats the file as untrusted: rank, every dimension, the element count (at most 2^31)
// and the byte count (at most the file's size: we never compress; a byte string at most the
// caller's cap) are checked before anything is allocated, and so is a string attribute's length
// (at most 64 KiB). The stored type must be the one expected (no silent conversion; an integer
// attribute must fit an int64). Every failure is a tf::InputError naming the file, the dataset or
// attribute and what was expected versus found, with HDF5's innermost reason for a damaged file.
// After HDF5 itself has failed on a file once, an H5Reader reads nothing more from it.
//
// Writing is atomic: H5Writer builds the file in memory and close() writes it to
// "<path>.partial", flushes it to disk and renames it onto `path`, so a crash mid-checkpoint never
// leaves a truncated file under the final name. If the writer is destroyed without close() (an
// exception unwound it), the partial file is deleted. Files use the HDF5 1.8 format, whose
// metadata (object headers, group indexes) carries checksums; raw data does not, so the writer
// adds an integrity header over every byte (Note [integrity header]). A failure to create, write,
// flush or rename the file (full disk, file size limit, permissions) is an InputError naming the
// file and the system's reason, and the partial file is deleted.
//
// Note [integrity header]: the first 512 bytes of a file H5Writer writes are an HDF5 user block,
// which HDF5, h5py and h5dump skip (the HDF5 data starts at byte 512). Once HDF5 has produced the
// file, the writer fills it with text, zero-padded to 512 bytes (`head -c 160 ckpt.h5` shows it):
//
//   tapeformer checkpoint              magic line
//   header_crc32 5e6f7a8b              crc32 (zlib) of the rest of the 512 bytes, padding included
//   version 1                          of this header
//   payload_offset 512                 where the HDF5 data starts
//   payload_bytes 1234567              bytes after the header: the file is 512 + this long
//   payload_crc32 1a2b3c4d             crc32 of those bytes
//
// H5Reader checks it before any HDF5 call, streaming the file in 1 MiB pieces: a file that is
// shorter or longer than the header says, or whose bytes do not match a checksum, is an InputError
// naming the file and what differs ("truncated: ...", "checksum mismatch ..."). crc32 detects
// every single-bit flip and every burst of up to 32 bits, in metadata and raw tensor data alike,
// which HDF5's own checksums miss. A file whose HDF5 data starts at byte 0 has no header
// (checkpoints written before the header, files written by h5py or the HDF5 C API) and is read as
// before, protected by the probe only; a file whose HDF5 data starts later but whose first bytes
// are not a valid header is refused (a damaged header, or another program's user block). Editing a
// file with h5py or the HDF5 C API keeps the old header, so the edit reads as damage until
// reseal_hdf5_file() writes a new one.
//
// Note [probing in a child process]: libhdf5 1.10.8 itself crashes or hangs on some damaged files
// (docs/fuzzing.md). So before opening a file in this process, H5Reader opens it in a forked child
// that uses only HDF5 and plain buffers (no OpenMP, no oneDNN; _exit, no atexit handlers) and
// walks every group, dataset and attribute as the reader's calls would: links by index and by
// name (plus one absent name per group), every attribute (strings only after their length passed
// the reader's limit), one element of every contiguous dataset and the whole of every other one
// the reader's limits allow. The child records each step in a page shared with the parent and its
// result in a pipe; the parent waits at most base_seconds + file bytes / bytes_per_second (10 s +
// 1 s per 50 MB by default) and kills it past that. A child killed by a signal, exiting otherwise
// or timing out is an InputError naming the file and the step. So is the first HDF5 call that
// fails in the child, named in the reader's words ("HDF5 file 'f.h5', looking up '/model/w':
// H5Oget_info_by_name failed (incorrect metadata checksum after all read attempts)"): this
// process then never calls HDF5 on a file HDF5 reports damaged, because libhdf5's error paths
// themselves crash depending on the heap's contents, which differ between child and parent
// (fuzzing found a wild free after a failed link-table build). The probe runs for sealed files
// too: crc32 is not a signature, so a valid header proves the bytes are those that were sealed,
// not that HDF5 can parse them (anyone can seal a forged file). It costs a fork and a metadata
// walk, measured in docs/checkpoint.md; a file that passed is not probed again by the process
// while its device, inode, size, times and crc32 are unchanged. Limits: a read past a buffer that
// does not crash the child is not seen (AddressSanitizer sees it), nor a fault that only calls the
// walk did not make would reach. In the child, fatal signals are reset to their default action (a
// crash handler of the program, or libFuzzer's, must not run for it), SIGINT is ignored (the
// parent's to handle), core dumps are off and the address space is capped at its size at fork +
// 1 GiB + twice the file.
//
// Debian's HDF5 is the serial, non-thread-safe build: use these classes from one thread at a time.
//
//   H5Writer out("run/ckpt.h5");
//   out.write_tensor("model", "blocks.0.attn.qkv.weight", w);   // (2304, 768) f32
//   out.write_attr("/", "step", int64_t{1200});
//   out.close();
//   H5Reader in("run/ckpt.h5");          // verifies the header, probes the file, then opens it
//   Tensor w2 = in.read_tensor("model", "blocks.0.attn.qkv.weight", DType::f32);
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "framework/tensor.h"

namespace H5 {
class H5File;
}  // namespace H5

namespace tf {

namespace hdf5 {
struct MemoryImage;
}  // namespace hdf5

using H5Attr = std::variant<std::string, int64_t, double>;

// How H5Reader probes a file in a child process before opening it (Note [probing in a child
// process]). The in-process checkpoint fuzz target keeps it on; TAPEFORMER_HDF5_PROBE=0 in the
// environment starts with it off (to debug HDF5 in-process, or where fork is not allowed).
struct Hdf5ProbeOptions {
  bool enabled = true;
  double base_seconds = 10;        // deadline = base_seconds + file bytes / bytes_per_second
  double bytes_per_second = 50e6;  // a slow disk, for the datasets the probe reads in full
};
void set_hdf5_probe_options(const Hdf5ProbeOptions& options);  // for every later H5Reader
Hdf5ProbeOptions hdf5_probe_options();

// Writes a new integrity header for the file at `path`, written by H5Writer and since edited on
// purpose with h5py or the HDF5 C API (Note [integrity header]). InputError if its HDF5 data does
// not start at byte 512 (a file without room for the header).
void reseal_hdf5_file(const std::string& path);

class H5Writer {
 public:
  explicit H5Writer(std::string path);  // creates (or replaces, on close) the file at `path`
  ~H5Writer();                          // without close(): discards the partial file
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  // Groups along `group` are created as needed. A name may not contain '/' nor exist already.
  void write_tensor(const std::string& group, const std::string& name, const Tensor& t);
  void write_u64(const std::string& group, const std::string& name, const std::vector<uint64_t>& values);
  void write_bytes(const std::string& group, const std::string& name, std::string_view bytes);
  // On the group or dataset at `path` (a missing group is created); replaces an existing key.
  void write_attr(const std::string& path, const std::string& key, const H5Attr& value);
  void write_attr(const std::string& path, const std::string& key, std::string value) {
    write_attr(path, key, H5Attr(std::move(value)));
  }
  void write_attr(const std::string& path, const std::string& key, const char* value) {
    write_attr(path, key, H5Attr(std::string(value)));
  }
  void write_attr(const std::string& path, const std::string& key, int64_t value) {
    write_attr(path, key, H5Attr(value));
  }
  void write_attr(const std::string& path, const std::string& key, int value) {
    write_attr(path, key, H5Attr(int64_t{value}));
  }
  void write_attr(const std::string& path, const std::string& key, double value) {
    write_attr(path, key, H5Attr(value));
  }

  void close();  // flushes, closes and moves the file into place; required for the file to exist
  const std::string& path() const { return path_; }

 private:
  std::string path_, partial_path_;
  std::unique_ptr<hdf5::MemoryImage> image_;  // the file's bytes, built in memory until close()
  std::unique_ptr<H5::H5File> file_;
  int fd_ = -1;                        // the open "<path>.partial"
  bool closed_ = false;                // close() succeeded: the file is in place
};

class H5Reader {
 public:
  // InputError if missing, unreadable, not HDF5, its integrity header does not match, or HDF5
  // crashes or hangs on it in the probe.
  explicit H5Reader(std::string path);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  // True when a group or dataset exists at `path` ("model/blocks.0.attn.qkv.weight").
  bool has(const std::string& path) const;
  bool has(const std::string& group, const std::string& name) const;
  // Names of the group's members (groups and datasets), in HDF5's name order.
  std::vector<std::string> list(const std::string& group) const;

  // The tensor as stored (f32, f64 or i32); with `expected`, any other dtype is an InputError.
  Tensor read_tensor(const std::string& group, const std::string& name,
                     std::optional<DType> expected = std::nullopt) const;
  // Reads into `dst` (e.g. a model parameter), which fixes the expected dtype and shape.
  void read_into(const std::string& group, const std::string& name, const Tensor& dst) const;
  std::vector<uint64_t> read_u64(const std::string& group, const std::string& name) const;
  // At most `max_bytes` (a cap for each kind of text, checked before anything is allocated).
  std::string read_bytes(const std::string& group, const std::string& name,
                         uint64_t max_bytes = uint64_t{1} << 30) const;

  bool has_attr(const std::string& path, const std::string& key) const;
  H5Attr read_attr(const std::string& path, const std::string& key) const;
  std::string read_attr_string(const std::string& path, const std::string& key) const;
  int64_t read_attr_int(const std::string& path, const std::string& key) const;
  double read_attr_double(const std::string& path, const std::string& key) const;  // accepts ints

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t file_size_ = 0;
  std::unique_ptr<H5::H5File> file_;
  // The first HDF5 error met reading the file: nothing is read after it (Note [no reading after
  // an HDF5 error] in hdf5_reader.cpp).
  mutable std::string damage_;
};

}  // namespace tf

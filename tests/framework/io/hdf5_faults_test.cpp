// HDF5 tensor I/O against untrusted files and failing disks: forged shapes, string lengths and
// integer values are refused before anything is allocated; wrong ranks and types, and every
// single-bit flip in a parameter's header of a file without the integrity header, are InputErrors
// naming the file and the dataset; a write that fails (file size limit, full disk, missing folder)
// names the file and the reason and keeps the file it would have replaced. Files are crafted with
// the HDF5 C API, which writes no integrity header (files with one: hdf5_integrity_test.cpp).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/io/hdf5_io.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf {
namespace {

namespace fs = std::filesystem;

using testing::error_message;
using testing::TempDir;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

Tensor counting(const Shape& shape) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.37 * (static_cast<double>(i) - 7);
  return Tensor::from_vector(v, shape, DType::f32);
}

// Datasets of the wrong rank or type for the reader that is asked for them.
TEST(Hdf5Faults, WrongRankAndTypeAreRefusedNamingTheDataset) {
  const TempDir dir;
  const std::string path = (dir / "ranks.h5").string();
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  auto make = [&](const char* name, hid_t type, std::vector<hsize_t> dims) {
    const hid_t space = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t ds = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(ds, 0) << name;
    H5Dclose(ds);
    H5Sclose(space);
  };
  make("u64_2d", H5T_STD_U64LE, {2, 3});
  make("u64_scalar", H5T_STD_U64LE, {});
  make("bytes_2d", H5T_STD_U8LE, {2, 2});
  make("i64", H5T_STD_I64LE, {4});
  make("f16", H5T_NATIVE_B16, {4});  // a 16-bit bitfield: no tensor dtype
  H5Fclose(file);

  H5Reader in(path);
  std::string msg = error_message<InputError>([&] { in.read_u64("/", "u64_2d"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'/u64_2d'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected rank at most 1, found rank 2"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_u64("/", "u64_scalar"); });
  EXPECT_NE(msg.find("expected a 1-D array, found a scalar"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_bytes("/", "bytes_2d"); });
  EXPECT_NE(msg.find("'/bytes_2d'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found rank 2"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_tensor("/", "i64"); });
  EXPECT_NE(msg.find("expected f32, f64 or i32 data, found signed 64-bit integer"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_u64("/", "i64"); });
  EXPECT_NE(msg.find("expected u64 data, found signed 64-bit integer"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_tensor("/", "f16", DType::f32); });
  EXPECT_NE(msg.find("'/f16'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected f32"), std::string::npos) << msg;
}

TEST(Hdf5Faults, ByteStringsLongerThanTheCallersCapAreRefused) {
  const TempDir dir;
  const std::string path = (dir / "capped.h5").string();
  H5Writer out(path);
  out.write_bytes("/", "recipe", std::string(100, 'x'));
  out.close();
  H5Reader in(path);
  EXPECT_EQ(in.read_bytes("/", "recipe", 100).size(), 100u);
  const std::string msg = error_message<InputError>([&] { in.read_bytes("/", "recipe", 99); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'/recipe'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declares 100 bytes, more than the 99 allowed"), std::string::npos) << msg;
}

// Finds `needle` in the file's bytes, which must hold it once.
size_t find_once(const std::string& bytes, const std::string& needle) {
  const size_t at = bytes.find(needle);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(bytes.find(needle, at + 1), std::string::npos) << "the pattern is not unique";
  return at;
}

template <class T>
std::string le_bytes(T value) {
  std::string out(sizeof(T), '\0');
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xFF);
  return out;
}

// A variable-length string attribute is a (length, heap address, index) reference; HDF5 trusts
// the length and allocates it. A forged length of 2^32 - 1 (here patched into a file written in
// the original format, whose object headers have no checksum) must be refused from the field
// alone: before the fix, this read took 8 GB and 80 s.
TEST(Hdf5Faults, ForgedStringAttributeLengthsAreRefusedBeforeAllocating) {
  const TempDir dir;
  const std::string honest = (dir / "honest.h5").string(), forged = (dir / "forged.h5").string();
  const std::string text = "2026-11-29T10:00:00Z";
  {
    const hid_t file = H5Fcreate(honest.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t vstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(vstr, H5T_VARIABLE);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(file, "created", vstr, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const char* value = text.c_str();
    ASSERT_GE(H5Awrite(attr, vstr, &value), 0);
    H5Aclose(attr);
    // An unsigned 64-bit integer past INT64_MAX, which HDF5 would clip to INT64_MAX silently.
    const hid_t u64 = H5Acreate2(file, "count", H5T_STD_U64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const uint64_t huge = uint64_t{1} << 63;
    ASSERT_GE(H5Awrite(u64, H5T_NATIVE_UINT64, &huge), 0);
    H5Aclose(u64);
    H5Sclose(scalar);
    H5Tclose(vstr);
    H5Fclose(file);
  }
  {
    H5Reader in(honest);
    EXPECT_EQ(in.read_attr_string("/", "created"), text);
    const std::string msg = error_message<InputError>([&] { in.read_attr_int("/", "count"); });
    EXPECT_NE(msg.find(honest), std::string::npos) << msg;
    EXPECT_NE(msg.find("'count'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unsigned value 9223372036854775808 does not fit a signed 64-bit integer"), std::string::npos)
        << msg;
  }
  std::string bytes = tf::testing::read_file(honest);
  const size_t heap = find_once(bytes, "GCOL");
  const size_t ref = find_once(bytes, le_bytes<uint32_t>(text.size()) + le_bytes<uint64_t>(heap));
  for (const uint32_t length : {uint32_t{0xFFFFFFFF}, uint32_t{64 * 1024 + 1}}) {
    bytes.replace(ref, 4, le_bytes<uint32_t>(length));
    tf::testing::write_file(forged, bytes);
    H5Reader in(forged);
    const std::string msg = error_message<InputError>([&] { in.read_attr_string("/", "created"); });
    EXPECT_NE(msg.find(forged), std::string::npos) << msg;
    EXPECT_NE(msg.find("attribute 'created' of '/'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("declares a string of " + std::to_string(length) + " bytes, more than the 65536 allowed"),
              std::string::npos)
        << msg;
  }
}

// A fixed-length string attribute declaring more than the cap, in dense attribute storage.
TEST(Hdf5Faults, LongFixedLengthStringAttributesAreRefused) {
  const TempDir dir;
  const std::string path = (dir / "long_attr.h5").string();
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  ASSERT_GE(file, 0);
  const hid_t fixed = H5Tcopy(H5T_C_S1);
  H5Tset_size(fixed, 100000);
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(file, "writer", fixed, scalar, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(attr, 0);
  const std::string value(100000, 'w');
  ASSERT_GE(H5Awrite(attr, fixed, value.data()), 0);
  H5Aclose(attr);
  H5Sclose(scalar);
  H5Tclose(fixed);
  H5Fclose(file);
  H5Pclose(fapl);

  H5Reader in(path);
  const std::string msg = error_message<InputError>([&] { in.read_attr_string("/", "writer"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("attribute 'writer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declares a string of 100000 bytes, more than the 65536 allowed"), std::string::npos) << msg;
}

// Every single-bit flip in a parameter's object header (shape, type, data address, ...) of a file
// without the integrity header (as h5py writes, or checkpoints from before it): the 1.8 format's
// header checksum refuses each one with an InputError naming the file and the dataset, never a
// crash, another exception, or a tensor of other values read without complaint. (With the
// integrity header, the file's checksum refuses every flip before HDF5 reads it.)
// The layout H5Writer gives the HDF5 data, without its integrity header: the 1.8 format, a group
// `model` of contiguous f32 datasets.
void write_parameters_with_the_c_api(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& params) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  ASSERT_GE(file, 0);
  const hid_t model = H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (const auto& [name, values] : params) {
    std::vector<hsize_t> dims(values.shape().begin(), values.shape().end());
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t ds = H5Dcreate2(model, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.raw_data()), 0);
    H5Dclose(ds);
    H5Sclose(space);
  }
  H5Gclose(model);
  H5Fclose(file);
  H5Pclose(fapl);
}

// Where the object header of `name` is, from the C API: (offset, size).
std::pair<haddr_t, hsize_t> object_header(const std::string& path, const std::string& name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  H5O_info_t info{};
  EXPECT_GE(H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT), 0);
  H5Fclose(file);
  return {info.addr, info.hdr.space.total};
}

TEST(Hdf5Faults, EveryBitFlipInAParameterHeaderIsRefused) {
  const TempDir dir;
  const std::string path = (dir / "params.h5").string(), flipped = (dir / "flipped.h5").string();
  const std::string name = "blocks.0.attn.qkv.weight";
  const Tensor w = counting({6, 4});
  write_parameters_with_the_c_api(path, {{name, w}, {"blocks.0.attn.qkv.bias", counting({6})}});
  ASSERT_TRUE(same_bytes(H5Reader(path).read_tensor("model", name), w));

  const auto [header, header_size] = object_header(path, "/model/" + name);
  const std::string bytes = tf::testing::read_file(path);
  ASSERT_EQ(bytes.substr(header, 4), "OHDR") << "expected a version 2 (checksummed) object header";
  ASSERT_GT(header_size, 20u);
  ASSERT_LE(header + header_size, bytes.size());

  // HDF5 in this process only: the probe (hdf5_probe_test.cpp) would fork 1,600 times here, and
  // every one of these files is known to be refused without a crash.
  const Hdf5ProbeOptions saved = hdf5_probe_options();
  set_hdf5_probe_options({.enabled = false});
  // Flipped in place in one copy (rewriting whole files makes the file system flush each one).
  tf::testing::write_file(flipped, bytes);
  std::fstream file(flipped, std::ios::in | std::ios::out | std::ios::binary);
  auto put = [&](hsize_t at, char c) {
    file.seekp(static_cast<std::streamoff>(at));
    file.put(c);
    file.flush();
  };
  int refused = 0;
  for (hsize_t byte = header; byte < header + header_size; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      SCOPED_TRACE("byte " + std::to_string(byte) + " bit " + std::to_string(bit));
      put(byte, static_cast<char>(bytes[byte] ^ (1 << bit)));
      try {
        const H5Reader in(flipped);
        const Tensor back = in.read_tensor("model", name, DType::f32);
        ADD_FAILURE() << "read without error; same bits: " << same_bytes(back, w);
      } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(flipped), std::string::npos) << msg;
        EXPECT_NE(msg.find("/model/" + name), std::string::npos) << msg;
        ++refused;
      }
      put(byte, bytes[byte]);
    }
  }
  EXPECT_EQ(refused, static_cast<int>(header_size * 8));
  set_hdf5_probe_options(saved);
}

// A flipped bit in a dataset's header: the probe meets HDF5's error first and refuses the file
// before this process calls HDF5 on it. Without the probe (or for an error the probe did not
// meet), after HDF5 has failed on the file once the reader reads nothing more from it, not even
// an intact dataset (Note [no reading after an HDF5 error] in hdf5_reader.cpp); a new reader
// starts afresh.
TEST(Hdf5Faults, AfterAnHdf5ErrorTheReaderReadsNothingMoreFromTheFile) {
  const TempDir dir;
  const std::string path = (dir / "params.h5").string();
  write_parameters_with_the_c_api(path, {{"a", counting({6})}, {"b", counting({4})}});
  std::string bytes = tf::testing::read_file(path);
  const auto [header, size] = object_header(path, "/model/a");
  bytes[header + 20] = static_cast<char>(bytes[header + 20] ^ 0x08);
  tf::testing::write_file(path, bytes);

  const std::string probed = error_message<InputError>([&] { H5Reader in(path); });
  EXPECT_EQ(probed, "HDF5 file '" + path + "', looking up '/model/a': H5Oget_info_by_name failed (incorrect metadata "
                    "checksum after all read attempts)");

  const Hdf5ProbeOptions saved = hdf5_probe_options();
  set_hdf5_probe_options({.enabled = false});
  {
    const H5Reader in(path);
    const std::string first = error_message<InputError>([&] { in.read_tensor("model", "a"); });
    EXPECT_NE(first.find("HDF5 file '" + path + "', dataset '/model/a': "), std::string::npos) << first;
    const std::string then = error_message<InputError>([&] { in.read_tensor("model", "b"); });
    EXPECT_EQ(then, "HDF5 file '" + path + "', dataset '/model/b': not read, since an earlier read of the file failed (" +
                        first.substr(first.find("dataset '/model/a'")) + ")");
    EXPECT_NE(error_message<InputError>([&] { in.has_attr("/", "step"); }).find("not read, since an earlier read"),
              std::string::npos);
    EXPECT_TRUE(same_bytes(H5Reader(path).read_tensor("model", "b"), counting({4})));
  }
  set_hdf5_probe_options(saved);
}

// Sets a file size limit for this process, with SIGXFSZ ignored so that a write past it fails
// with EFBIG instead of killing the process, and restores both when it goes.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

// A write that fails (a file size limit: EFBIG; a full disk: ENOSPC, from /dev/full) is an
// InputError naming the file and the system's reason; the file it would have replaced is left
// bit for bit as it was, and no ".partial" file is left behind.
TEST(Hdf5Faults, AFailedWriteNamesTheFileAndKeepsThePreviousOne) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string();
  {
    H5Writer out(path);
    out.write_tensor("model", "w", counting({10}));
    out.close();
  }
  const std::string before = tf::testing::read_file(path);
  ASSERT_LT(before.size(), 64u * 1024);
  const Tensor big = counting({256, 256});  // 256 KiB: past the limit below

  std::string msg;
  {
    const FileSizeLimit limit(64 * 1024);
    msg = error_message<InputError>([&] {
      H5Writer out(path);
      out.write_tensor("model", "w", big);
      out.close();
    });
  }
  EXPECT_NE(msg.find("cannot write '" + path + ".partial'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(EFBIG)), std::string::npos) << msg;
  EXPECT_NE(msg.find("65536 of "), std::string::npos) << msg;  // how far it got
  EXPECT_EQ(tf::testing::read_file(path), before);
  EXPECT_FALSE(fs::exists(path + ".partial"));

  if (fs::exists("/dev/full")) {
    fs::create_symlink("/dev/full", path + ".partial");  // every write to it fails with ENOSPC
    msg = error_message<InputError>([&] {
      H5Writer out(path);
      out.write_tensor("model", "w", big);
      out.close();
    });
    EXPECT_NE(msg.find("cannot write '" + path + ".partial'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::strerror(ENOSPC)), std::string::npos) << msg;
    EXPECT_EQ(tf::testing::read_file(path), before);
    EXPECT_FALSE(fs::exists(fs::symlink_status(path + ".partial")));
  }

  // A folder that cannot hold the file fails when the writer is created, before any work.
  msg = error_message<InputError>([&] { H5Writer out((dir / "no_such_folder" / "ckpt.h5").string()); });
  EXPECT_NE(msg.find("cannot create '" + (dir / "no_such_folder" / "ckpt.h5").string() + ".partial'"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;

  // And a writer still works afterwards, in the same process.
  H5Writer out(path);
  out.write_tensor("model", "w", big);
  out.close();
  EXPECT_TRUE(same_bytes(H5Reader(path).read_tensor("model", "w"), big));
}

// Creates, with the HDF5 C API, datasets whose declared shapes are forged: chunked and never
// written, so no chunk is allocated and the file stays a few kilobytes.
void write_forged(const std::string& path) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  auto forge = [&](const char* name, std::vector<hsize_t> dims) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    const hid_t ds = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(ds, 0) << name;
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  };
  forge("too_many_elements", {uint64_t{1} << 20, uint64_t{1} << 20});  // 2^40 elements
  forge("one_huge_dim", {uint64_t{1} << 40});
  forge("bigger_than_file", {uint64_t{1} << 15, uint64_t{1} << 15});  // 2^30 floats = 4 GiB
  forge("rank7", {1, 1, 1, 1, 1, 1, 2});
  H5Fclose(file);
}

TEST(Hdf5Faults, ForgedHugeShapesAreRefusedBeforeAllocating) {
  const TempDir dir;
  const std::string path = (dir / "forged.h5").string();
  write_forged(path);
  ASSERT_LT(fs::file_size(path), 64u * 1024) << "the forged datasets must not be allocated";
  H5Reader in(path);
  const uint64_t allocations = storage_allocation_count();

  std::string msg = error_message<InputError>([&] { in.read_tensor("/", "too_many_elements"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/too_many_elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(1048576, 1048576)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2^31"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("/", "one_huge_dim"); });
  EXPECT_NE(msg.find("/one_huge_dim"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2^31"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("/", "bigger_than_file"); });
  EXPECT_NE(msg.find("/bigger_than_file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4294967296 bytes"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("/", "rank7"); });
  EXPECT_NE(msg.find("/rank7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected rank at most 6, found rank 7"), std::string::npos) << msg;

  EXPECT_EQ(storage_allocation_count(), allocations) << "a refused dataset must allocate nothing";
}

}  // namespace
}  // namespace tf

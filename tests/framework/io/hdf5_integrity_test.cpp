// The integrity header of H5Writer's files (framework/io/hdf5_io.h, Note [integrity header]): its
// fields against crc32 computed here and by Python's zlib; every way a file can differ from what
// was written — cut short, appended to, one bit flipped in the header, in HDF5's metadata or in raw
// tensor data — is an InputError naming the file and what differs, before HDF5 reads it; files
// without a header (h5py's, the C API's, older checkpoints) still read; h5py reads ours.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <cstdio>
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
using testing::read_file;
using testing::TempDir;
using testing::write_file;

constexpr size_t kHeader = 512;
const std::string kSignature("\x89HDF\r\n\x1a\n", 8);

Tensor counting(const Shape& shape) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * (static_cast<double>(i) - 11);
  return Tensor::from_vector(v, shape, DType::f32);
}

// A file shaped like a checkpoint: attributes, texts, tensors, generator state.
void write_sample(const std::string& path) {
  H5Writer out(path);
  out.write_attr("/", "format_version", 1);
  out.write_attr("/", "created", "2026-11-29T15:00:00Z");
  out.write_bytes("/", "recipe", "model:\n  d_model: 8\n");
  out.write_tensor("model", "blocks.0.attn.qkv.weight", counting({24, 8}));
  out.write_tensor("model", "blocks.0.attn.qkv.bias", counting({24}));
  out.write_u64("rng", "dropout", {42, 7});
  out.close();
}

std::string hex8(uint32_t v) {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", v);
  return out;
}

uint32_t crc_of(const std::string& bytes, size_t from, size_t to) {
  return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()) + from, to - from));
}

// The value of "key value\n" in the header text.
std::string field(const std::string& header, const std::string& key) {
  const size_t at = header.find("\n" + key + " ");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  return header.substr(start, header.find('\n', start) - start);
}

// An InputError from opening `path`; "" (and a test failure) otherwise.
std::string open_error(const std::string& path) {
  return error_message<InputError>([&] { H5Reader in(path); });
}

void expect_has(const std::string& message, const std::string& fragment) {
  EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
}

TEST(Hdf5Integrity, HeaderHoldsTheLengthAndChecksumOfEverythingAfterIt) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string();
  write_sample(path);
  const std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), kHeader + 1000);
  const std::string header = bytes.substr(0, kHeader);
  EXPECT_EQ(header.rfind("tapeformer checkpoint\nheader_crc32 ", 0), 0u) << header;
  EXPECT_EQ(bytes.substr(kHeader, 8), kSignature) << "the HDF5 data must start right after the header";
  EXPECT_EQ(field(header, "version"), "1");
  EXPECT_EQ(field(header, "payload_offset"), "512");
  EXPECT_EQ(field(header, "payload_bytes"), std::to_string(bytes.size() - kHeader));
  EXPECT_EQ(field(header, "payload_crc32"), hex8(crc_of(bytes, kHeader, bytes.size())));
  // The header's own checksum covers everything after its line, the zero padding included.
  const size_t body = header.find('\n', header.find("header_crc32")) + 1;
  EXPECT_EQ(field(header, "header_crc32"), hex8(crc_of(bytes, body, kHeader)));
  const size_t text_end = header.find('\n', header.find("payload_crc32")) + 1;
  EXPECT_EQ(header.find_first_not_of('\0', text_end), std::string::npos) << "padding must be zeros";

  const H5Reader in(path);
  EXPECT_EQ(in.read_attr_int("/", "format_version"), 1);
  EXPECT_EQ(in.read_u64("rng", "dropout"), (std::vector<uint64_t>{42, 7}));
}

// h5py (the HDF5 library's own reader of user blocks) reads the file, and Python's zlib agrees
// with the header: an independent implementation of both.
TEST(Hdf5Integrity, H5pyReadsAWrittenCheckpointAndItsZlibAgreesWithTheHeader) {
  if (std::system("/usr/bin/python3 -c 'import h5py' > /dev/null 2>&1") != 0) GTEST_SKIP() << "h5py not installed";
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string(), script = (dir / "read.py").string(),
                    out = (dir / "out.txt").string();
  write_sample(path);
  write_file(script, R"(import sys, zlib, h5py
raw = open(sys.argv[1], 'rb').read()
fields = dict(line.split(' ', 1) for line in raw[:512].rstrip(b'\0').decode().splitlines()[1:])
assert int(fields['payload_bytes']) == len(raw) - 512, fields
assert int(fields['payload_crc32'], 16) == zlib.crc32(raw[512:]), fields
with h5py.File(sys.argv[1], 'r') as f:
    w = f['model']['blocks.0.attn.qkv.weight'][()]
    print(f.userblock_size, f.attrs['format_version'], f.attrs['created'], bytes(f['recipe'][()]).decode().split()[0],
          w.shape, w.dtype, w[0, 0], w[23, 7], [int(x) for x in f['rng']['dropout'][()]])
)");
  const std::string command = "/usr/bin/python3 '" + script + "' '" + path + "' > '" + out + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(out);
  // counting(): element i is 0.25 (i - 11): the first -2.75, the last (i = 191) 45.
  EXPECT_EQ(read_file(out), "512 1 2026-11-29T15:00:00Z model: (24, 8) float32 -2.75 45.0 [42, 7]\n");
}

TEST(Hdf5Integrity, TruncatedFilesAreRefusedNamingBothLengths) {
  const TempDir dir;
  const std::string whole = (dir / "whole.h5").string(), cut = (dir / "cut.h5").string();
  write_sample(whole);
  const std::string bytes = read_file(whole);
  const size_t payload = bytes.size() - kHeader;

  write_file(cut, bytes.substr(0, 100));
  std::string msg = open_error(cut);
  expect_has(msg, "HDF5 file '" + cut + "' is truncated: 100 bytes, fewer than its 512-byte integrity header");

  for (const size_t keep : {kHeader, kHeader + 8, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(keep));
    write_file(cut, bytes.substr(0, keep));
    msg = open_error(cut);
    expect_has(msg, "HDF5 file '" + cut + "' is truncated: its integrity header says " + std::to_string(payload) +
                        " bytes after the header, the file has " + std::to_string(keep - kHeader));
  }

  write_file(cut, bytes + "more");
  msg = open_error(cut);
  expect_has(msg, "HDF5 file '" + cut + "' has " + std::to_string(payload + 4) +
                      " bytes after its integrity header, more than the " + std::to_string(payload) +
                      " the header says");
}

// Flips every bit of the 512-byte header in turn: each is refused before HDF5 sees the file.
TEST(Hdf5Integrity, EveryBitFlipInTheHeaderIsRefused) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string(), flipped = (dir / "flipped.h5").string();
  write_sample(path);
  const std::string bytes = read_file(path);
  write_file(flipped, bytes);
  std::fstream file(flipped, std::ios::in | std::ios::out | std::ios::binary);
  auto put = [&](size_t at, char c) {
    file.seekp(static_cast<std::streamoff>(at));
    file.put(c);
    file.flush();
  };
  const size_t magic = std::string("tapeformer checkpoint\n").size();
  int not_a_header = 0, damaged = 0;
  for (size_t byte = 0; byte < kHeader; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      put(byte, static_cast<char>(bytes[byte] ^ (1 << bit)));
      const std::string msg = open_error(flipped);
      EXPECT_NE(msg.find("HDF5 file '" + flipped + "'"), std::string::npos) << "byte " << byte << ": " << msg;
      if (msg.find("are not a tapeformer integrity header") != std::string::npos) ++not_a_header;
      if (msg.find("its integrity header is damaged (the header's own checksum does not match)") != std::string::npos)
        ++damaged;
      put(byte, bytes[byte]);
    }
  }
  EXPECT_EQ(not_a_header, static_cast<int>(magic * 8)) << "a flip in the magic line";
  EXPECT_EQ(damaged, static_cast<int>((kHeader - magic) * 8)) << "a flip anywhere else in the header";
  EXPECT_NO_THROW(H5Reader in(flipped)) << "restored";
}

// Where a dataset's object header (or, with `data`, its raw values) starts in the file. HDF5 1.10
// gives an object's address from the superblock, after the user block, but H5Dget_offset from
// the start of the file (both checked against the bytes found there).
haddr_t dataset_location(const std::string& path, const std::string& name, bool data) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  const hid_t fcpl = H5Fget_create_plist(file);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl, &userblock);
  H5Pclose(fcpl);
  haddr_t at = 0;
  if (data) {
    const hid_t ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    at = H5Dget_offset(ds);
    H5Dclose(ds);
  } else {
    H5O_info_t info{};
    EXPECT_GE(H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT), 0);
    at = info.addr;
  }
  H5Fclose(file);
  return data ? at : at + userblock;
}

// One bit in the superblock, in a parameter's object header and in a parameter's raw values: the
// payload checksum refuses each. The last is what HDF5 alone cannot see: resealed (so that the
// checksum agrees with the flipped bit), the file reads without complaint, one value changed.
TEST(Hdf5Integrity, BitFlipsInMetadataAndRawDataAreRefusedByTheChecksum) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string(), flipped = (dir / "flipped.h5").string();
  const std::string name = "/model/blocks.0.attn.qkv.weight";
  write_sample(path);
  const std::string bytes = read_file(path);
  const haddr_t header = dataset_location(path, name, false), data = dataset_location(path, name, true);
  ASSERT_EQ(bytes.substr(header, 4), "OHDR") << "object header at " << header;
  std::string le_value(4, '\0');
  const float first = -2.75f;
  std::memcpy(le_value.data(), &first, 4);
  ASSERT_EQ(bytes.substr(data, 4), le_value) << "raw data at " << data;

  struct Case {
    const char* what;
    size_t byte;
  };
  for (const Case c : {Case{"superblock", kHeader + 20}, Case{"object header", header + 40}, Case{"raw data", data + 2}}) {
    SCOPED_TRACE(c.what);
    std::string damaged = bytes;
    damaged[c.byte] = static_cast<char>(damaged[c.byte] ^ 0x04);
    write_file(flipped, damaged);
    const std::string msg = open_error(flipped);
    expect_has(msg, "HDF5 file '" + flipped + "': checksum mismatch: the " + std::to_string(bytes.size() - kHeader) +
                        " bytes after the integrity header have crc32 " +
                        hex8(crc_of(damaged, kHeader, damaged.size())) + ", the header says " +
                        hex8(crc_of(bytes, kHeader, bytes.size())));
    expect_has(msg, "the file was altered or damaged after it was written");
  }

  reseal_hdf5_file(flipped);  // the raw-data flip, now with a matching checksum
  const Tensor back = H5Reader(flipped).read_tensor("model", "blocks.0.attn.qkv.weight", DType::f32);
  const Tensor original = counting({24, 8});
  EXPECT_NE(back.at(0), original.at(0)) << "HDF5 checks no raw data: the flip reads through";
  EXPECT_EQ(std::memcmp(static_cast<const float*>(back.raw_data()) + 1, static_cast<const float*>(original.raw_data()) + 1,
                        (24 * 8 - 1) * sizeof(float)),
            0)
      << "and changes nothing else";
}

// Files without the header: h5py's and the C API's (HDF5 data at byte 0) read as before; a user
// block that is not our header (zeros, as `h5py.File(..., userblock_size=512)` leaves it, or 1024
// bytes of it) is refused, since it cannot be told from a damaged header.
TEST(Hdf5Integrity, FilesWithoutAHeaderReadAndForeignUserBlocksAreRefused) {
  const TempDir dir;
  for (const hsize_t userblock : {hsize_t{0}, hsize_t{512}, hsize_t{1024}}) {
    SCOPED_TRACE("user block " + std::to_string(userblock));
    const std::string path = (dir / ("c_api_" + std::to_string(userblock) + ".h5")).string();
    const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, userblock);
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hsize_t n = 3;
    const float values[3] = {1.5f, -2.0f, 4.25f};
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t ds = H5Dcreate2(file, "w", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(file);
    H5Pclose(fcpl);

    if (userblock == 0) {
      const Tensor w = H5Reader(path).read_tensor("/", "w", DType::f32);
      EXPECT_EQ(w.to_vector(), (std::vector<double>{1.5, -2.0, 4.25}));
    } else {
      expect_has(open_error(path), "HDF5 file '" + path + "': its first " + std::to_string(userblock) +
                                       " bytes, before the HDF5 data, are not a tapeformer integrity header");
      if (userblock == 512) {  // reseal makes a 512-byte user block ours
        reseal_hdf5_file(path);
        EXPECT_EQ(H5Reader(path).read_tensor("/", "w").to_vector(), (std::vector<double>{1.5, -2.0, 4.25}));
      }
    }
    if (userblock != 512)
      expect_has(error_message<InputError>([&] { reseal_hdf5_file(path); }),
                 "cannot reseal '" + path + "': its HDF5 data does not start at byte 512");
  }
}

TEST(Hdf5Integrity, ANewerHeaderVersionIsRefusedByName) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string();
  write_sample(path);
  std::string bytes = read_file(path);
  const size_t version = bytes.find("\nversion 1\n");
  ASSERT_LT(version, kHeader);
  bytes[version + 9] = '2';
  const size_t body = bytes.find('\n', bytes.find("header_crc32")) + 1;  // re-sign the header as a writer would
  bytes.replace(bytes.find("header_crc32 ") + 13, 8, hex8(crc_of(bytes, body, kHeader)));
  write_file(path, bytes);
  expect_has(open_error(path), "HDF5 file '" + path + "': integrity header version 2 is not supported (this build reads version 1)");
}

// An edit through the HDF5 C API (as h5py's 'r+' mode) keeps the old header, so it reads as damage
// until reseal_hdf5_file() writes a new one.
TEST(Hdf5Integrity, AnEditWithTheCApiIsRefusedUntilResealed) {
  const TempDir dir;
  const std::string path = (dir / "ckpt.h5").string();
  write_sample(path);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t attr = H5Aopen(file, "format_version", H5P_DEFAULT);
  const int64_t edited = 5;
  ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT64, &edited), 0);
  H5Aclose(attr);
  H5Fclose(file);

  const std::string msg = open_error(path);
  expect_has(msg, "checksum mismatch");
  expect_has(msg, "altered or damaged after it was written");
  reseal_hdf5_file(path);
  EXPECT_EQ(H5Reader(path).read_attr_int("/", "format_version"), 5);
  EXPECT_EQ(read_file(path).rfind("tapeformer checkpoint\n", 0), 0u);
}

}  // namespace
}  // namespace tf

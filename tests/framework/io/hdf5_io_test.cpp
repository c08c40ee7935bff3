// HDF5 tensor I/O: bit-exact round trips, dotted names, atomic writing, and the basic refusals
// (missing, mistyped, not HDF5, truncated). Forged and damaged files and failing writes are in
// hdf5_faults_test.cpp.
#include "framework/io/hdf5_io.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "support/errors.h"
#include "support/temp_dir.h"

namespace tf {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

using testing::error_message;

Tensor counting(const Shape& shape, DType dtype) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = (dtype == DType::i32 ? 1.0 : 0.37) * (static_cast<double>(i) - 7);
  if (dtype == DType::i32) {
    std::vector<int32_t> ids(v.begin(), v.end());
    return Tensor::from_ids(ids, shape);
  }
  return Tensor::from_vector(v, shape, dtype);
}

TEST(Hdf5Io, RoundTripsEveryDtypeBitExactly) {
  const TempDir dir;
  const std::string path = (dir / "round_trip.h5").string();
  Tensor f32 = counting({3, 5}, DType::f32);
  f32.data<float>()[0] = -0.0f;  // sign of zero, infinities and NaN must survive unchanged
  f32.data<float>()[1] = std::numeric_limits<float>::infinity();
  f32.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  f32.data<float>()[3] = std::numeric_limits<float>::denorm_min();
  const Tensor f64 = counting({4, 1, 2}, DType::f64);
  const Tensor i32 = Tensor::from_ids({-2147483647 - 1, -1, 0, 2147483647}, {4});
  const Tensor scalar = Tensor::scalar(3.25, DType::f64);       // 0-d: a scalar dataspace
  const Tensor rank6 = counting({2, 1, 3, 1, 2, 2}, DType::f32);  // Shape::kMaxRank dimensions
  const Tensor empty = Tensor::zeros({0, 3});
  const std::vector<uint64_t> rng_state = {0, 1, 0xFFFFFFFFFFFFFFFFull, 0x8000000000000000ull};
  const std::string bytes("tok\0enizer \xC3\xA9\xFF", 15);  // embedded NUL, UTF-8, invalid UTF-8

  H5Writer out(path);
  out.write_tensor("t", "f32", f32);
  out.write_tensor("t", "f64", f64);
  out.write_tensor("t", "i32", i32);
  out.write_tensor("/t/nested/", "scalar", scalar);
  out.write_tensor("t", "rank6", rank6);
  out.write_tensor("t", "empty", empty);
  out.write_u64("rng", "state", rng_state);
  out.write_bytes("", "tokenizer", bytes);
  out.write_bytes("", "nothing", "");
  out.write_attr("/", "format", "tapeformer-checkpoint");
  out.write_attr("/", "step", int64_t{-9007199254740993});  // not representable as a double
  out.write_attr("t/f32", "scale", 0.1);                     // on a dataset
  out.write_attr("meta", "seed", 42);                         // creates the group
  EXPECT_FALSE(fs::exists(path)) << "the file must appear only on close()";
  out.close();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));

  H5Reader in(path);
  EXPECT_TRUE(same_bytes(in.read_tensor("t", "f32"), f32));
  EXPECT_TRUE(same_bytes(in.read_tensor("t", "f64", DType::f64), f64));
  EXPECT_TRUE(same_bytes(in.read_tensor("/t", "i32", DType::i32), i32));
  const Tensor scalar_back = in.read_tensor("t/nested", "scalar");
  EXPECT_EQ(scalar_back.rank(), 0);
  EXPECT_TRUE(same_bytes(scalar_back, scalar));
  EXPECT_TRUE(same_bytes(in.read_tensor("t", "rank6"), rank6));
  EXPECT_EQ(in.read_tensor("t", "empty").shape(), Shape({0, 3}));
  EXPECT_EQ(in.read_u64("rng", "state"), rng_state);
  EXPECT_EQ(in.read_bytes("/", "tokenizer"), bytes);
  EXPECT_EQ(in.read_bytes("/", "nothing"), "");
  EXPECT_EQ(in.read_attr_string("/", "format"), "tapeformer-checkpoint");
  EXPECT_EQ(in.read_attr_int("", "step"), -9007199254740993);
  EXPECT_EQ(in.read_attr_double("t/f32", "scale"), 0.1);
  EXPECT_EQ(in.read_attr_int("meta", "seed"), 42);
  EXPECT_EQ(in.read_attr_double("meta", "seed"), 42.0);
  EXPECT_TRUE(in.has_attr("/", "format"));
  EXPECT_FALSE(in.has_attr("/", "missing"));
  EXPECT_FALSE(in.has_attr("no/such/group", "format"));

  Tensor dst = Tensor::zeros({4, 1, 2}, DType::f64);
  in.read_into("t", "f64", dst);
  EXPECT_TRUE(same_bytes(dst, f64));
}

TEST(Hdf5Io, DottedNamesAreOneLinkInsideTheGroup) {
  const TempDir dir;
  const std::string path = (dir / "dotted.h5").string();
  const Tensor w = counting({6, 2}, DType::f32);
  H5Writer out(path);
  out.write_tensor("model", "blocks.0.attn.qkv.weight", w);
  out.write_tensor("model", "blocks.0.attn.qkv.bias", counting({6}, DType::f32));
  out.close();

  H5Reader in(path);
  EXPECT_EQ(in.list("/"), std::vector<std::string>{"model"});
  EXPECT_EQ(in.list("model"), (std::vector<std::string>{"blocks.0.attn.qkv.bias", "blocks.0.attn.qkv.weight"}));
  EXPECT_TRUE(in.has("model/blocks.0.attn.qkv.weight"));
  EXPECT_TRUE(in.has("model", "blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(in.has("model/blocks"));
  EXPECT_FALSE(in.has("model/blocks.0.attn.qkv.weight/deeper"));
  EXPECT_TRUE(same_bytes(in.read_tensor("model", "blocks.0.attn.qkv.weight"), w));

  // Independently of our reader: the C API resolves the same absolute path to one dataset.
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GT(H5Lexists(file, "/model/blocks.0.attn.qkv.weight", H5P_DEFAULT), 0);
  H5Fclose(file);
}

TEST(Hdf5Io, WriterRefusesDuplicatesAndSlashesAndDiscardsAnUnclosedFile) {
  const TempDir dir;
  const std::string path = (dir / "misuse.h5").string();
  {
    H5Writer out(path);
    out.write_tensor("m", "w", Tensor::zeros({2}));
    EXPECT_THROW(out.write_tensor("m", "w", Tensor::zeros({2})), Error);
    EXPECT_THROW(out.write_tensor("m", "a/b", Tensor::zeros({2})), Error);
    EXPECT_THROW(out.write_tensor("m/w", "x", Tensor::zeros({2})), Error);  // m/w is a dataset
    EXPECT_TRUE(fs::exists(path + ".partial"));
  }  // destroyed without close(), as when an exception unwinds a checkpoint writer
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

TEST(Hdf5Io, MissingOrMistypedDatasetsNameFileDatasetAndExpectation) {
  const TempDir dir;
  const std::string path = (dir / "mistyped.h5").string();
  H5Writer out(path);
  out.write_tensor("model", "w", Tensor::zeros({2, 3}, DType::f64));
  out.write_bytes("model", "text", "abc");
  out.write_attr("/", "name", "gpt");
  out.close();
  H5Reader in(path);

  std::string msg = error_message<InputError>([&] { in.read_tensor("model", "missing.weight"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/model/missing.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("nogroup", "w"); });
  EXPECT_NE(msg.find("/nogroup/w"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("model", "w", DType::f32); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/model/w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64-bit float"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_into("model", "w", Tensor::zeros({3, 2}, DType::f64)); });
  EXPECT_NE(msg.find("expected shape (3, 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found (2, 3)"), std::string::npos) << msg;

  msg = error_message<InputError>([&] { in.read_tensor("model", "text"); });  // bytes are not a tensor
  EXPECT_NE(msg.find("unsigned 8-bit integer"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_bytes("model", "w"); });
  EXPECT_NE(msg.find("expected u8 (bytes)"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_u64("/", "model"); });
  EXPECT_NE(msg.find("expected a dataset, found a group"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_attr_int("/", "name"); });
  EXPECT_NE(msg.find("expected an integer, found a string"), std::string::npos) << msg;
  msg = error_message<InputError>([&] { in.read_attr_string("/", "absent"); });
  EXPECT_NE(msg.find("'absent'"), std::string::npos) << msg;
}

TEST(Hdf5Io, MissingNonHdf5AndTruncatedFilesAreInputErrorsNamingTheFile) {
  const TempDir dir;
  const std::string missing = (dir / "does_not_exist.h5").string();
  std::string msg = error_message<InputError>([&] { H5Reader in(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;

  const std::string text = (dir / "not_hdf5.h5").string();
  std::ofstream(text) << "step,loss\n1,4.2\n";
  msg = error_message<InputError>([&] { H5Reader in(text); });
  EXPECT_NE(msg.find(text), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;

  // A whole file cut in half, as a crash of a non-atomic writer or a partial copy would leave it.
  const std::string whole = (dir / "whole.h5").string(), truncated = (dir / "truncated.h5").string();
  H5Writer out(whole);
  out.write_tensor("model", "w", counting({100, 100}, DType::f32));
  out.close();
  const auto size = fs::file_size(whole);
  fs::copy_file(whole, truncated);
  fs::resize_file(truncated, size / 2);
  msg = error_message<InputError>([&] {
    H5Reader in(truncated);
    in.read_tensor("model", "w");
  });
  EXPECT_NE(msg.find(truncated), std::string::npos) << msg;
}

TEST(Hdf5Io, H5dumpReadsTheFile) {
  if (std::system("command -v h5dump > /dev/null 2>&1") != 0) GTEST_SKIP() << "h5dump (hdf5-tools) not installed";
  const TempDir dir;
  const std::string path = (dir / "h5dump.h5").string(), dump = (dir / "h5dump.txt").string();
  H5Writer out(path);
  out.write_tensor("model", "blocks.0.attn.qkv.weight", Tensor::from_vector({1.5, -2.0}, {2}));
  out.write_attr("/", "step", 7);
  out.close();
  const std::string command = "h5dump '" + path + "' > '" + dump + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dump);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("DATASET \"blocks.0.attn.qkv.weight\""), std::string::npos) << text;
  EXPECT_NE(text.find("H5T_IEEE_F32LE"), std::string::npos) << text;
  EXPECT_NE(text.find("1.5, -2"), std::string::npos) << text;
  EXPECT_NE(text.find("ATTRIBUTE \"step\""), std::string::npos) << text;
}

}  // namespace
}  // namespace tf

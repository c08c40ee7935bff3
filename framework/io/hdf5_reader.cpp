// HDF5 reading of named tensors, byte strings and attributes (see hdf5_io.h). The file is user
// input: its integrity header is verified and it is probed in a child process before HDF5 opens it
// here (hdf5_integrity.cpp, hdf5_probe.cpp); every size, type and length is checked before
// anything is allocated, and every failure, HDF5's included, is a tf::InputError naming the file
// and the object.
#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "framework/io/hdf5_io.h"
#include "framework/io/hdf5_io_common.h"
#include "framework/looked_for.h"

namespace tf {

namespace {

namespace fs = std::filesystem;
using namespace hdf5;

// Note [variable-length string length]: a variable-length string is stored as a reference
// (length: 4 bytes, global heap address, index), and HDF5 allocates and fills `length` bytes
// when it converts one to memory, trusting the length field: a forged length of 2^32 - 1 made a
// read of a 10-byte attribute take 8 GB and 80 s. To learn the length before HDF5 allocates, we
// register a conversion from a variable-length string to a 4-byte opaque type of our own; it
// receives the raw reference and returns its length field.
constexpr const char* kLengthTag = "tapeformer: variable-length string length";

herr_t vlen_string_length(hid_t src, hid_t dst, H5T_cdata_t* cdata, size_t n, size_t stride, size_t, void* buf,
                          void*, hid_t) {
  switch (cdata->command) {
    case H5T_CONV_INIT: {  // accept only (variable-length string -> our opaque type)
      if (H5Tis_variable_str(src) <= 0 || H5Tget_class(dst) != H5T_OPAQUE) return -1;
      char* tag = H5Tget_tag(dst);
      const bool ours = tag != nullptr && std::strcmp(tag, kLengthTag) == 0;
      H5free_memory(tag);
      return ours ? 0 : -1;
    }
    case H5T_CONV_CONV: {  // in place, front to back: each 4-byte output lands at or before its input
      const size_t src_step = stride ? stride : H5Tget_size(src), dst_step = stride ? stride : 4;
      auto* bytes = static_cast<unsigned char*>(buf);
      for (size_t i = 0; i < n; ++i) {
        const unsigned char* ref = bytes + i * src_step;  // the file format's little-endian uint32 first
        const uint32_t length = ref[0] | ref[1] << 8 | ref[2] << 16 | static_cast<uint32_t>(ref[3]) << 24;
        std::memcpy(bytes + i * dst_step, &length, 4);
      }
      return 0;
    }
    default: return 0;  // H5T_CONV_FREE: nothing to free
  }
}

// What a dataset's stored element type is, in our vocabulary.
enum class Stored { f32, f64, i32, u64, u8, other };

Stored classify(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) return size == 4 ? Stored::f32 : size == 8 ? Stored::f64 : Stored::other;
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (is_signed && size == 4) return Stored::i32;
    if (!is_signed && size == 8) return Stored::u64;
    if (!is_signed && size == 1) return Stored::u8;
  }
  return Stored::other;
}
const char* stored_name(Stored s) {
  static const char* names[] = {"f32", "f64", "i32", "u64", "u8 (bytes)", "other"};
  return names[static_cast<int>(s)];
}
Stored stored_of(DType d) {
  return d == DType::f32 ? Stored::f32 : d == DType::f64 ? Stored::f64 : Stored::i32;
}
// A dataset opened for reading, with its shape already checked against the limits.
struct CheckedDataset {
  H5::DataSet ds;
  std::string where;  // "HDF5 file 'ckpt.h5', dataset '/model/w'", the prefix of every message
  Stored stored = Stored::other;
  Shape shape;
};

// Opens group/name, which must be a dataset, and classifies its stored type.
CheckedDataset open_dataset(const H5::H5File& file, const std::string& file_path, const std::string& group,
                            const std::string& name) {
  CheckedDataset c;
  const std::string path = join(group, name);
  c.where = concat("HDF5 file '", file_path, "', dataset '", path, "'");
  // Walk the path so that a missing intermediate group is reported as missing, not as an HDF5 error.
  const std::vector<std::string> parts = split_path(path);
  TF_CHECK_INPUT(!parts.empty(), c.where, ": empty dataset name");
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += "/" + parts[i];  // its parent is known to be a group, so HDF5 can answer
    TF_CHECK_INPUT(file.nameExists(prefix), c.where, ": not found (", i + 1 < parts.size() ? "no group" : "no member",
                   " '", parts[i], "')");
    const H5O_type_t kind = file.childObjType(prefix);
    if (i + 1 < parts.size()) {
      TF_CHECK_INPUT(kind == H5O_TYPE_GROUP, c.where, ": '", parts[i], "' is not a group");
    } else {
      TF_CHECK_INPUT(kind == H5O_TYPE_DATASET, c.where, ": expected a dataset, found a group");
    }
  }
  c.ds = file.openDataSet(path);

  c.stored = classify(c.ds.getDataType().getId());
  return c;
}

// Checks the declared shape before anything is allocated: rank at most `max_rank`, each dimension
// and the element count at most 2^31, and the byte count at most the file's size (our writer
// never compresses, so honest data cannot be larger than its file). Sets c.shape.
void check_shape(CheckedDataset& c, int max_rank, uint64_t file_size) {
  const size_t element_size = H5Tget_size(c.ds.getDataType().getId());
  const H5::DataSpace space = c.ds.getSpace();
  const H5S_class_t space_class = space.getSimpleExtentType();
  TF_CHECK_INPUT(space_class == H5S_SCALAR || space_class == H5S_SIMPLE, c.where,
                 ": expected a scalar or an array, found an empty (null) dataspace");
  const int rank = space_class == H5S_SCALAR ? 0 : space.getSimpleExtentNdims();
  TF_CHECK_INPUT(rank >= 0 && rank <= max_rank, c.where, ": expected rank at most ", max_rank,
                 ", found rank ", rank);
  std::vector<hsize_t> dims(rank);
  if (rank > 0) space.getSimpleExtentDims(dims.data());
  std::string declared = "(";
  for (int i = 0; i < rank; ++i) declared += (i ? ", " : "") + std::to_string(dims[i]);
  declared += rank == 1 ? ",)" : ")";
  uint64_t numel = 1;
  for (hsize_t d : dims) {
    TF_CHECK_INPUT(d <= kMaxElements && (d == 0 || numel <= kMaxElements / d), c.where,
                   ": declared shape ", declared, " has more than 2^31 elements; refusing to allocate it");
    numel *= d;
  }
  TF_CHECK_INPUT(numel * element_size <= file_size, c.where, ": declared shape ", declared, " of ",
                 element_size, "-byte elements needs ", numel * element_size, " bytes but the file has only ",
                 file_size, " (truncated or forged?)");
  for (hsize_t d : dims) c.shape.push_back(static_cast<int64_t>(d));
}

void expect_stored(const CheckedDataset& c, Stored expected) {
  TF_CHECK_INPUT(c.stored == expected, c.where, ": expected ", stored_name(expected), " data, found ",
                 describe_type(c.ds.getDataType().getId()));
}
// Runs f, turning HDF5's exceptions (a damaged file) into an InputError about `what`.
//
// Note [no reading after an HDF5 error]: the first HDF5 error is remembered in `damage`, and
// nothing more is read from the file. After an error, libhdf5's state for the file is one the
// probe never saw (fuzzing found a root group whose first read failed its checksum and whose
// second read succeeded, listing a group on which H5Lget_name_by_idx then freed a wild pointer);
// a file that failed once is damaged anyway.
template <class F>
auto reading(const std::string& file_path, std::string& damage, const std::string& what, F&& f) -> decltype(f()) {
  TF_CHECK_INPUT(damage.empty(), "HDF5 file '", file_path, "', ", what, ": not read, since an earlier read of the "
                 "file failed (", damage, ")");
  forget_cause();
  try {
    return f();
  } catch (const H5::Exception& e) {
    damage = concat(what, ": ", detail(e));
    throw InputError(concat("HDF5 file '", file_path, "', ", damage));
  }
}

}  // namespace

// The opaque type that vlen_string_length converts to (registered on first use).
hid_t hdf5::vlen_length_type() {
  static const hid_t type = [] {
    const hid_t t = H5Tcreate(H5T_OPAQUE, 4);
    H5Tset_tag(t, kLengthTag);
    const hid_t vstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(vstr, H5T_VARIABLE);
    H5Tregister(H5T_PERS_SOFT, "tapeformer vlen length", vstr, t, vlen_string_length);
    H5Tclose(vstr);
    return t;
  }();
  return type;
}

// ---------------------------------------------------------------------------------------------
// Reader

// Order matters: our own checks of the bytes (no HDF5 call), then HDF5 in a child process, then
// HDF5 in this one.
H5Reader::H5Reader(std::string path) : path_(std::move(path)) {
  init();
  std::error_code ec;
  TF_CHECK_INPUT(fs::exists(path_, ec), "cannot open HDF5 file '", path_, "': no such file (", looked_for(path_), ")");
  TF_CHECK_INPUT(fs::is_regular_file(path_, ec), "cannot open HDF5 file '", path_, "': not a regular file");
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  TF_CHECK_INPUT(fd >= 0, "cannot open HDF5 file '", path_, "': ", std::strerror(errno));
  CheckedFile checked;
  try {
    struct stat st {};
    TF_CHECK_INPUT(::fstat(fd, &st) == 0, "cannot open HDF5 file '", path_, "': ", std::strerror(errno));
    file_size_ = static_cast<uint64_t>(st.st_size);
    const uint32_t crc = verify_integrity(fd, path_, file_size_);
    auto ns = [](const timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; };
    checked = CheckedFile{st.st_dev, st.st_ino, file_size_, ns(st.st_mtim), ns(st.st_ctim), crc};
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (hdf5_probe_options().enabled) probe(path_, checked);
  try {
    file_ = std::make_unique<H5::H5File>(path_, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    throw InputError(concat("cannot open HDF5 file '", path_, "' (truncated or damaged?): ", detail(e)));
  }
}

H5Reader::~H5Reader() = default;

bool H5Reader::has(const std::string& path) const {
  return reading(path_, damage_, concat("looking up '", normalize(path), "'"), [&] { return exists(*file_, path); });
}

bool H5Reader::has(const std::string& group, const std::string& name) const { return has(join(group, name)); }

std::vector<std::string> H5Reader::list(const std::string& group) const {
  const std::string g = normalize(group);
  TF_CHECK_INPUT(has(g), "HDF5 file '", path_, "': group '", g, "' not found");
  return reading(path_, damage_, concat("listing group '", g, "'"), [&] {
    TF_CHECK_INPUT(g == "/" || file_->childObjType(g) == H5O_TYPE_GROUP, "HDF5 file '", path_, "': '", g,
                   "' is a dataset, expected a group");
    const H5::Group grp = file_->openGroup(g);
    std::vector<std::string> names;
    for (hsize_t i = 0, n = grp.getNumObjs(); i < n; ++i) {
      std::string name = grp.getObjnameByIdx(i);
      // An empty name would make group + "/" + name the group itself (a damaged index listed 21
      // of them, and a walk of the tree became exponential: hdf5_link_lookup_hang.h5).
      TF_CHECK_INPUT(!name.empty() && name.find('/') == std::string::npos, "HDF5 file '", path_, "', group '", g,
                     "': member ", i, " is named '", name, "', which no HDF5 link can be (damaged group index)");
      names.push_back(std::move(name));
    }
    return names;
  });
}

Tensor H5Reader::read_tensor(const std::string& group, const std::string& name,
                             std::optional<DType> expected) const {
  return reading(path_, damage_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    DType dtype;
    if (c.stored == Stored::f32) dtype = DType::f32;
    else if (c.stored == Stored::f64) dtype = DType::f64;
    else if (c.stored == Stored::i32) dtype = DType::i32;
    else
      throw InputError(concat(c.where, ": expected ", expected ? dtype_name(*expected) : "f32, f64 or i32",
                              " data, found ", describe_type(c.ds.getDataType().getId())));
    if (expected) expect_stored(c, stored_of(*expected));
    check_shape(c, Shape::kMaxRank, file_size_);
    Tensor t = Tensor::empty(c.shape, dtype);
    if (t.numel() > 0) c.ds.read(t.raw_data(), memory_type(dtype));
    return t;
  });
}

void H5Reader::read_into(const std::string& group, const std::string& name, const Tensor& dst) const {
  reading(path_, damage_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, stored_of(dst.dtype()));
    check_shape(c, Shape::kMaxRank, file_size_);
    TF_CHECK_INPUT(c.shape == dst.shape(), c.where, ": expected shape ", dst.shape(), " for ", dst.describe(),
                   ", found ", c.shape);
    if (dst.numel() > 0) c.ds.read(dst.raw_data(), memory_type(dst.dtype()));
  });
}

std::vector<uint64_t> H5Reader::read_u64(const std::string& group, const std::string& name) const {
  return reading(path_, damage_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, Stored::u64);
    check_shape(c, 1, file_size_);
    TF_CHECK_INPUT(c.shape.rank() == 1, c.where, ": expected a 1-D array, found a scalar");
    std::vector<uint64_t> values(c.shape.numel());
    if (!values.empty()) c.ds.read(values.data(), H5::PredType::NATIVE_UINT64);
    return values;
  });
}

std::string H5Reader::read_bytes(const std::string& group, const std::string& name, uint64_t max_bytes) const {
  return reading(path_, damage_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, Stored::u8);
    check_shape(c, 1, file_size_);
    TF_CHECK_INPUT(c.shape.rank() == 1, c.where, ": expected a 1-D byte array, found a scalar");
    TF_CHECK_INPUT(static_cast<uint64_t>(c.shape.numel()) <= max_bytes, c.where, ": declares ", c.shape.numel(),
                   " bytes, more than the ", max_bytes, " allowed for it; refusing to read it");
    std::string bytes(c.shape.numel(), '\0');
    if (!bytes.empty()) c.ds.read(bytes.data(), H5::PredType::NATIVE_UINT8);
    return bytes;
  });
}

bool H5Reader::has_attr(const std::string& path, const std::string& key) const {
  if (!has(path)) return false;
  return reading(path_, damage_, concat("attribute '", key, "' of '", normalize(path), "'"), [&] {
    bool found = false;
    with_object(*file_, path, [&](H5::H5Object& obj) { found = obj.attrExists(key); });
    return found;
  });
}

H5Attr H5Reader::read_attr(const std::string& path, const std::string& key) const {
  const std::string where = concat("HDF5 file '", path_, "', attribute '", key, "' of '", normalize(path), "'");
  TF_CHECK_INPUT(has(path), where, ": '", normalize(path), "' not found");
  return reading(path_, damage_, concat("attribute '", key, "' of '", normalize(path), "'"), [&] {
    H5Attr result;
    with_object(*file_, path, [&](H5::H5Object& obj) {
      TF_CHECK_INPUT(obj.attrExists(key), where, ": not found");
      const H5::Attribute attr = obj.openAttribute(key);
      const H5::DataSpace space = attr.getSpace();
      TF_CHECK_INPUT(space.getSimpleExtentNpoints() == 1, where, ": expected a single value, found ",
                     space.getSimpleExtentNpoints());
      const H5::DataType type = attr.getDataType();
      switch (type.getClass()) {
        case H5T_STRING: {
          const H5::StrType str_type = attr.getStrType();
          // Checked before HDF5 allocates: the declared size of a fixed-length string, or the
          // length field of a variable-length one (Note [variable-length string length]).
          uint64_t length = str_type.getSize();
          if (str_type.isVariableStr()) {
            uint32_t stored = 0;
            if (H5Aread(attr.getId(), vlen_length_type(), &stored) < 0)
              throw H5::AttributeIException("H5Aread", "reading the string's length failed");
            length = stored;
          }
          TF_CHECK_INPUT(length <= kMaxAttrString, where, ": declares a string of ", length,
                         " bytes, more than the ", kMaxAttrString, " allowed for an attribute; refusing to read it");
          std::string s;
          attr.read(str_type, s);
          result = std::move(s);
          break;
        }
        case H5T_INTEGER: {
          // Any size and sign, as long as the value is an int64: HDF5 would clip a larger
          // unsigned value silently.
          if (H5Tget_sign(type.getId()) == H5T_SGN_NONE && type.getSize() >= 8) {
            uint64_t u = 0;
            attr.read(H5::PredType::NATIVE_UINT64, &u);
            TF_CHECK_INPUT(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where,
                           ": unsigned value ", u, " does not fit a signed 64-bit integer");
            result = static_cast<int64_t>(u);
            break;
          }
          TF_CHECK_INPUT(type.getSize() <= 8, where, ": expected an integer of at most 64 bits, found ",
                         describe_type(type.getId()));
          int64_t i = 0;
          attr.read(H5::PredType::NATIVE_INT64, &i);
          result = i;
          break;
        }
        case H5T_FLOAT: {
          double d = 0;
          attr.read(H5::PredType::NATIVE_DOUBLE, &d);
          result = d;
          break;
        }
        default:
          throw InputError(concat(where, ": expected a string, integer or float, found ",
                                  describe_type(type.getId())));
      }
    });
    return result;
  });
}

namespace {
const char* attr_kind(const H5Attr& a) {
  return std::holds_alternative<std::string>(a) ? "a string" : std::holds_alternative<int64_t>(a) ? "an integer" : "a float";
}
}  // namespace

std::string H5Reader::read_attr_string(const std::string& path, const std::string& key) const {
  const H5Attr a = read_attr(path, key);
  TF_CHECK_INPUT(std::holds_alternative<std::string>(a), "HDF5 file '", path_, "', attribute '", key, "' of '",
                 normalize(path), "': expected a string, found ", attr_kind(a));
  return std::get<std::string>(a);
}

int64_t H5Reader::read_attr_int(const std::string& path, const std::string& key) const {
  const H5Attr a = read_attr(path, key);
  TF_CHECK_INPUT(std::holds_alternative<int64_t>(a), "HDF5 file '", path_, "', attribute '", key, "' of '",
                 normalize(path), "': expected an integer, found ", attr_kind(a));
  return std::get<int64_t>(a);
}

double H5Reader::read_attr_double(const std::string& path, const std::string& key) const {
  const H5Attr a = read_attr(path, key);
  if (const auto* i = std::get_if<int64_t>(&a)) return static_cast<double>(*i);
  TF_CHECK_INPUT(std::holds_alternative<double>(a), "HDF5 file '", path_, "', attribute '", key, "' of '",
                 normalize(path), "': expected a number, found ", attr_kind(a));
  return std::get<double>(a);
}

}  // namespace tf

// HDF5 reading and writing of named tensors, byte strings and attributes; see hdf5_io.h.
// HDF5's C++ API throws H5::Exception; every one is translated here into a tf::Error (writing) or
// a tf::InputError (reading: the file is user input) that names the file and the object.
#include "framework/hdf5_io.h"

#include <H5Cpp.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace tf {

namespace {

namespace fs = std::filesystem;

// Elements a dataset may declare before we refuse it (2^31: far above any tensor we train).
constexpr uint64_t kMaxElements = uint64_t{1} << 31;

// HDF5 prints its error stack to stderr by default; we report through exceptions instead.
void silence_hdf5() {
  static const bool done = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)done;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// "/a/b" for "a/b", "/a/b/" and "/a//b"; "/" for "" and "/".
std::string normalize(const std::string& group) {
  std::string out;
  for (const std::string& part : split_path(group)) out += "/" + part;
  return out.empty() ? "/" : out;
}

std::string join(const std::string& group, const std::string& name) {
  const std::string g = normalize(group);
  return g == "/" ? g + name : g + "/" + name;
}

std::string detail(const H5::Exception& e) {
  const std::string func = e.getFuncName(), msg = e.getDetailMsg();
  return func.empty() ? msg : func + ": " + msg;
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

std::string describe_type(hid_t type) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return concat(size * 8, "-bit float");
    case H5T_INTEGER:
      return concat(H5Tget_sign(type) == H5T_SGN_2 ? "signed " : "unsigned ", size * 8, "-bit integer");
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "variable-length sequence";
    default: return "unsupported type";
  }
}

const char* stored_name(Stored s) {
  static const char* names[] = {"f32", "f64", "i32", "u64", "u8 (bytes)", "other"};
  return names[static_cast<int>(s)];
}

const H5::PredType& file_type(DType d) {
  switch (d) {
    case DType::f32: return H5::PredType::IEEE_F32LE;
    case DType::f64: return H5::PredType::IEEE_F64LE;
    case DType::i32: return H5::PredType::STD_I32LE;
  }
  throw Error("unknown dtype");
}

const H5::PredType& memory_type(DType d) {
  switch (d) {
    case DType::f32: return H5::PredType::NATIVE_FLOAT;
    case DType::f64: return H5::PredType::NATIVE_DOUBLE;
    case DType::i32: return H5::PredType::NATIVE_INT32;
  }
  throw Error("unknown dtype");
}

Stored stored_of(DType d) {
  return d == DType::f32 ? Stored::f32 : d == DType::f64 ? Stored::f64 : Stored::i32;
}

H5::DataSpace space_of(const Shape& shape) {
  if (shape.rank() == 0) return H5::DataSpace(H5S_SCALAR);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5::DataSpace(shape.rank(), dims.data());
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

// True when a group or dataset exists at `path`; walks the path, because HDF5 fails rather than
// answering false when an intermediate group is missing.
bool exists(const H5::H5File& file, const std::string& path) {
  const std::vector<std::string> parts = split_path(path);
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += "/" + parts[i];
    if (!file.nameExists(prefix)) return false;
    if (i + 1 < parts.size() && file.childObjType(prefix) != H5O_TYPE_GROUP) return false;
  }
  return true;  // the root, or every component was found
}

// Runs f, turning HDF5's exceptions (a damaged file) into an InputError about `what`.
template <class F>
auto reading(const std::string& file_path, const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const H5::Exception& e) {
    throw InputError(concat("HDF5 file '", file_path, "', ", what, ": ", detail(e)));
  }
}

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

H5Writer::H5Writer(std::string path) : path_(std::move(path)), partial_path_(path_ + ".partial") {
  silence_hdf5();
  try {
    file_ = std::make_unique<H5::H5File>(partial_path_, H5F_ACC_TRUNC);
  } catch (const H5::Exception& e) {
    throw InputError(concat("cannot create HDF5 file '", partial_path_, "': ", detail(e)));
  }
}

H5Writer::~H5Writer() {
  if (!file_) return;
  try {
    file_->close();
  } catch (...) {  // a destructor must not throw; the partial file is discarded below anyway
  }
  std::error_code ignored;
  fs::remove(partial_path_, ignored);
}

namespace {

H5::Group ensure_group(const H5::H5File& file, const std::string& file_path, const std::string& group) {
  std::string prefix;
  for (const std::string& part : split_path(group)) {
    prefix += "/" + part;
    if (!file.nameExists(prefix)) {
      file.createGroup(prefix);
      continue;
    }
    TF_CHECK(file.childObjType(prefix) == H5O_TYPE_GROUP, "HDF5 file '", file_path, "': '", prefix,
             "' exists and is not a group");
  }
  return file.openGroup(normalize(group));
}

// Creates group/name (which must be new) as `stored` over `space` and writes `data` (in `memory`
// layout) into it, unless the dataset is empty.
void write_dataset(const H5::H5File& file, const std::string& file_path, const std::string& group,
                   const std::string& name, const H5::DataType& stored, const H5::DataSpace& space,
                   const void* data, const H5::DataType& memory) {
  TF_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
           "HDF5 file '", file_path, "': dataset name '", name, "' must be non-empty and contain no '/'");
  try {
    const H5::Group g = ensure_group(file, file_path, group);
    TF_CHECK(!g.nameExists(name), "HDF5 file '", file_path, "': '", join(group, name), "' written twice");
    const H5::DataSet ds = g.createDataSet(name, stored, space);
    if (space.getSimpleExtentNpoints() > 0) ds.write(data, memory);
  } catch (const H5::Exception& e) {
    throw Error(concat("HDF5 file '", file_path, "': writing '", join(group, name), "': ", detail(e)));
  }
}

}  // namespace

void H5Writer::write_tensor(const std::string& group, const std::string& name, const Tensor& t) {
  TF_CHECK(file_, "HDF5 file '", path_, "': write after close()");
  write_dataset(*file_, partial_path_, group, name, file_type(t.dtype()), space_of(t.shape()), t.raw_data(),
                memory_type(t.dtype()));
}

void H5Writer::write_u64(const std::string& group, const std::string& name, const std::vector<uint64_t>& values) {
  TF_CHECK(file_, "HDF5 file '", path_, "': write after close()");
  const hsize_t n = values.size();
  write_dataset(*file_, partial_path_, group, name, H5::PredType::STD_U64LE, H5::DataSpace(1, &n), values.data(),
                H5::PredType::NATIVE_UINT64);
}

void H5Writer::write_bytes(const std::string& group, const std::string& name, std::string_view bytes) {
  TF_CHECK(file_, "HDF5 file '", path_, "': write after close()");
  const hsize_t n = bytes.size();
  write_dataset(*file_, partial_path_, group, name, H5::PredType::STD_U8LE, H5::DataSpace(1, &n), bytes.data(),
                H5::PredType::NATIVE_UINT8);
}

void H5Writer::write_attr(const std::string& path, const std::string& key, const H5Attr& value) {
  TF_CHECK(file_, "HDF5 file '", path_, "': write after close()");
  try {
    const std::string p = normalize(path);
    if (!exists(*file_, p)) ensure_group(*file_, partial_path_, p);
    with_object(*file_, p, [&](H5::H5Object& obj) {
      if (obj.attrExists(key)) obj.removeAttr(key);
      const H5::DataSpace scalar(H5S_SCALAR);
      if (const auto* s = std::get_if<std::string>(&value)) {
        H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
        type.setCset(H5T_CSET_UTF8);  // h5py then returns str rather than bytes
        obj.createAttribute(key, type, scalar).write(type, *s);
      } else if (const auto* i = std::get_if<int64_t>(&value)) {
        obj.createAttribute(key, H5::PredType::STD_I64LE, scalar).write(H5::PredType::NATIVE_INT64, i);
      } else {
        const double d = std::get<double>(value);
        obj.createAttribute(key, H5::PredType::IEEE_F64LE, scalar).write(H5::PredType::NATIVE_DOUBLE, &d);
      }
    });
  } catch (const H5::Exception& e) {
    throw Error(concat("HDF5 file '", partial_path_, "': writing attribute '", key, "' of '", normalize(path),
                       "': ", detail(e)));
  }
}

namespace {
void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  TF_CHECK_INPUT(fd >= 0, "cannot open '", path, "' to flush it to disk: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  TF_CHECK_INPUT(rc == 0, "cannot flush '", path, "' to disk: ", std::strerror(saved));
}
}  // namespace

void H5Writer::close() {
  TF_CHECK(file_, "HDF5 file '", path_, "': close() called twice");
  try {
    file_->close();
  } catch (const H5::Exception& e) {
    throw Error(concat("HDF5 file '", partial_path_, "': closing: ", detail(e)));
  }
  file_.reset();
  // Flush the data to disk before the rename makes it visible, and the folder entry after it:
  // otherwise a power cut could leave the new name pointing at unwritten blocks.
  sync_path(partial_path_);
  std::error_code ec;
  fs::rename(partial_path_, path_, ec);
  TF_CHECK_INPUT(!ec, "cannot move '", partial_path_, "' to '", path_, "': ", ec.message());
  const fs::path folder = fs::path(path_).parent_path();
  sync_path(folder.empty() ? "." : folder.string());
}

// ---------------------------------------------------------------------------------------------
// Reader

H5Reader::H5Reader(std::string path) : path_(std::move(path)) {
  silence_hdf5();
  std::error_code ec;
  TF_CHECK_INPUT(fs::exists(path_, ec), "cannot open HDF5 file '", path_, "': no such file");
  TF_CHECK_INPUT(fs::is_regular_file(path_, ec), "cannot open HDF5 file '", path_, "': not a regular file");
  file_size_ = fs::file_size(path_, ec);
  TF_CHECK_INPUT(!ec, "cannot open HDF5 file '", path_, "': ", ec.message());
  bool is_hdf5 = false;
  try {
    is_hdf5 = H5::H5File::isHdf5(path_);
  } catch (const H5::Exception& e) {
    throw InputError(concat("cannot open HDF5 file '", path_, "': ", detail(e)));
  }
  TF_CHECK_INPUT(is_hdf5, "'", path_, "' is not an HDF5 file (no HDF5 signature found)");
  try {
    file_ = std::make_unique<H5::H5File>(path_, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    throw InputError(concat("cannot open HDF5 file '", path_, "' (truncated or damaged?): ", detail(e)));
  }
}

H5Reader::~H5Reader() = default;

bool H5Reader::has(const std::string& path) const {
  return reading(path_, concat("looking up '", normalize(path), "'"), [&] { return exists(*file_, path); });
}

bool H5Reader::has(const std::string& group, const std::string& name) const { return has(join(group, name)); }

std::vector<std::string> H5Reader::list(const std::string& group) const {
  const std::string g = normalize(group);
  TF_CHECK_INPUT(has(g), "HDF5 file '", path_, "': group '", g, "' not found");
  return reading(path_, concat("listing group '", g, "'"), [&] {
    TF_CHECK_INPUT(g == "/" || file_->childObjType(g) == H5O_TYPE_GROUP, "HDF5 file '", path_, "': '", g,
                   "' is a dataset, expected a group");
    const H5::Group grp = file_->openGroup(g);
    std::vector<std::string> names;
    for (hsize_t i = 0, n = grp.getNumObjs(); i < n; ++i) names.push_back(grp.getObjnameByIdx(i));
    return names;
  });
}

Tensor H5Reader::read_tensor(const std::string& group, const std::string& name,
                             std::optional<DType> expected) const {
  return reading(path_, concat("dataset '", join(group, name), "'"), [&] {
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
  reading(path_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, stored_of(dst.dtype()));
    check_shape(c, Shape::kMaxRank, file_size_);
    TF_CHECK_INPUT(c.shape == dst.shape(), c.where, ": expected shape ", dst.shape(), " for ", dst.describe(),
                   ", found ", c.shape);
    if (dst.numel() > 0) c.ds.read(dst.raw_data(), memory_type(dst.dtype()));
  });
}

std::vector<uint64_t> H5Reader::read_u64(const std::string& group, const std::string& name) const {
  return reading(path_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, Stored::u64);
    check_shape(c, 1, file_size_);
    TF_CHECK_INPUT(c.shape.rank() == 1, c.where, ": expected a 1-D array, found a scalar");
    std::vector<uint64_t> values(c.shape.numel());
    if (!values.empty()) c.ds.read(values.data(), H5::PredType::NATIVE_UINT64);
    return values;
  });
}

std::string H5Reader::read_bytes(const std::string& group, const std::string& name) const {
  return reading(path_, concat("dataset '", join(group, name), "'"), [&] {
    CheckedDataset c = open_dataset(*file_, path_, group, name);
    expect_stored(c, Stored::u8);
    check_shape(c, 1, file_size_);
    TF_CHECK_INPUT(c.shape.rank() == 1, c.where, ": expected a 1-D byte array, found a scalar");
    std::string bytes(c.shape.numel(), '\0');
    if (!bytes.empty()) c.ds.read(bytes.data(), H5::PredType::NATIVE_UINT8);
    return bytes;
  });
}

bool H5Reader::has_attr(const std::string& path, const std::string& key) const {
  if (!has(path)) return false;
  bool found = false;
  try {
    with_object(*file_, path, [&](H5::H5Object& obj) { found = obj.attrExists(key); });
  } catch (const H5::Exception& e) {
    throw InputError(concat("HDF5 file '", path_, "', attribute '", key, "' of '", normalize(path), "': ",
                            detail(e)));
  }
  return found;
}

H5Attr H5Reader::read_attr(const std::string& path, const std::string& key) const {
  const std::string where = concat("HDF5 file '", path_, "', attribute '", key, "' of '", normalize(path), "'");
  TF_CHECK_INPUT(has(path), where, ": '", normalize(path), "' not found");
  H5Attr result;
  try {
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
          TF_CHECK_INPUT(str_type.isVariableStr() || str_type.getSize() <= file_size_, where,
                         ": declared string length ", str_type.getSize(), " exceeds the file size");
          std::string s;
          attr.read(str_type, s);
          result = std::move(s);
          break;
        }
        case H5T_INTEGER: {
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
  } catch (const H5::Exception& e) {
    throw InputError(concat(where, ": ", detail(e)));
  }
  return result;
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

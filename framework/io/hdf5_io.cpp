// HDF5 writing of named tensors, byte strings and attributes (see hdf5_io.h), and the internals
// the reader shares (hdf5_io_common.h). HDF5's C++ API throws H5::Exception; every one is
// translated into a tf::Error that names the file and the object; a file system that refuses the
// file is an InputError (Note [writing through memory]).
#include "framework/io/hdf5_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "framework/io/hdf5_io_common.h"

namespace tf {

namespace hdf5 {

namespace {

// The innermost message of the last failed HDF5 call ("incorrect metadata checksum after all read
// tries", "... errno = 27, error message = 'File too large'"): HDF5's C++ exceptions carry only
// the outermost ("H5Dopen2 failed"), and by the time a catch block runs, destructors of the
// unwound objects have called HDF5 again and cleared its error stack. So it is captured here, by
// HDF5's automatic error handler, which HDF5 calls as the failing API function returns.
thread_local std::string g_last_cause;

herr_t capture_innermost(unsigned, const H5E_error2_t* entry, void* out) {
  if (entry->desc && *entry->desc) *static_cast<std::string*>(out) = entry->desc;
  return 0;  // keep walking: the last entry walked downward is the innermost
}

herr_t capture_error_stack(hid_t stack, void*) {
  std::string innermost;
  H5Ewalk2(stack, H5E_WALK_DOWNWARD, capture_innermost, &innermost);
  if (!innermost.empty()) g_last_cause = innermost;
  return 0;  // and print nothing: we report through exceptions
}

}  // namespace

void init() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, capture_error_stack, nullptr);
    return true;
  }();
  (void)done;
}

void forget_cause() { g_last_cause.clear(); }

std::string detail(const std::string& what) {
  std::string out = what;
  if (!g_last_cause.empty()) out += " (" + g_last_cause + ")";
  g_last_cause.clear();
  return out;
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
  std::string out = e.getDetailMsg();
  if (out.empty()) out = e.getFuncName();
  if (!g_last_cause.empty()) out += " (" + g_last_cause + ")";
  g_last_cause.clear();
  return out;
}

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

}  // namespace hdf5

namespace {

namespace fs = std::filesystem;
using namespace hdf5;

H5::DataSpace space_of(const Shape& shape) {
  if (shape.rank() == 0) return H5::DataSpace(H5S_SCALAR);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5::DataSpace(shape.rank(), dims.data());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

// Note [writing through memory]: HDF5 builds the file in memory (its "core" driver) and close()
// writes the finished image to "<path>.partial" with plain write() calls, then fsync and rename.
// Writing through HDF5's own file driver instead, a full disk (ENOSPC) or a file size limit
// (EFBIG) fails inside HDF5 and leaves its file object half-closed: HDF5 1.10 then crashes when
// it closes its open files at exit, so the program would die by SIGSEGV instead of reporting
// the error. In memory, HDF5 never sees an I/O error, and ours name the file and the cause.
// The image is taken from HDF5 as it closes the file, through file image callbacks that keep the
// buffer instead of freeing it: H5Fget_file_image on the open file would copy it, and in HDF5
// 1.10.8 returns a 1.8-format superblock whose checksum no longer matches (readers refuse it).
// Holding the whole image also lets close() checksum it before the first byte reaches the disk.
// The cost: a checkpoint's image is held in memory while it is written (19 MB for a
// 1.6M-parameter model with its Adam moments).
struct hdf5::MemoryImage {
  void* data = nullptr;  // (capacity) bytes from std::realloc; the file is its first image_length()
  size_t capacity = 0;
  bool released = false;  // HDF5 closed the file and gave the buffer up to us
  ~MemoryImage() { std::free(data); }
};

namespace {

void* image_realloc(void* ptr, size_t size, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<hdf5::MemoryImage*>(udata);
  if (size == 0) {  // realloc(p, 0) need not return a usable pointer: free and say so
    std::free(ptr);
    image->data = nullptr;
    image->capacity = 0;
    return nullptr;
  }
  void* grown = std::realloc(ptr, size);
  if (grown == nullptr) return nullptr;  // HDF5 reports the failure; `ptr` is still held
  image->data = grown;
  image->capacity = size;
  return grown;
}

herr_t image_free(void* ptr, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<hdf5::MemoryImage*>(udata);
  if (ptr == image->data) image->released = true;  // kept: ~MemoryImage frees it
  else std::free(ptr);
  return 0;
}

void* image_malloc(size_t size, H5FD_file_image_op_t op, void* udata) { return image_realloc(nullptr, size, op, udata); }
void* image_memcpy(void* dst, const void* src, size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(dst, src, size);
}
void* udata_copy(void* udata) { return udata; }  // one MemoryImage, owned by the writer
herr_t udata_free(void*) { return 0; }

// The file's length: the end-of-file address of its superblock (version 2, as the 1.8 format
// writes it, after the user block of the integrity header: signature (8), version, offset size,
// length size, flags, base address (8), extension address (8), end-of-file address (8), ...). HDF5
// 1.10 counts it from the start of the file, user block included (h5py's files with a user block
// are exactly that long). The buffer may exceed it.
size_t image_length(const hdf5::MemoryImage& image, const std::string& file) {
  const auto* bytes = static_cast<const unsigned char*>(image.data);
  const unsigned char* super = bytes + kHeaderBytes;
  TF_CHECK(image.released && image.capacity >= kHeaderBytes + 48 && std::memcmp(super, "\x89HDF\r\n\x1a\n", 8) == 0 &&
               (super[8] == 2 || super[8] == 3) && super[9] == 8,
           "HDF5 file '", file, "': the in-memory image does not have a version 2 superblock at byte ", kHeaderBytes);
  uint64_t end = 0;
  for (int i = 7; i >= 0; --i) end = end << 8 | super[28 + i];
  TF_CHECK(end <= image.capacity, "HDF5 file '", file, "': end of file ", end, " beyond the image's ",
           image.capacity, " bytes");
  return static_cast<size_t>(end);
}

}  // namespace

H5Writer::H5Writer(std::string path)
    : path_(std::move(path)), partial_path_(path_ + ".partial"), image_(std::make_unique<hdf5::MemoryImage>()) {
  init();
  // Created now, so that a folder we cannot write to fails before any work is done.
  fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TF_CHECK_INPUT(fd_ >= 0, "cannot create '", partial_path_, "': ", std::strerror(errno));
  try {
    H5::FileAccPropList access;
    access.setCore(size_t{4} << 20, false);  // grow by 4 MiB; no backing file: see the note above
    H5FD_file_image_callbacks_t callbacks = {image_malloc, image_memcpy, image_realloc, image_free,
                                             udata_copy,   udata_free,   image_.get()};
    if (H5Pset_file_image_callbacks(access.getId(), &callbacks) < 0)
      throw H5::PropListIException("H5Pset_file_image_callbacks", "setting the file image callbacks failed");
    // Format of HDF5 1.8, whose object headers and group indexes carry checksums: a flipped bit
    // in a header is then refused on read instead of being read as a different shape or address.
    access.setLibverBounds(H5F_LIBVER_V18, H5F_LIBVER_V18);
    H5::FileCreatPropList create;
    create.setUserblock(kHeaderBytes);  // room for the integrity header (Note [integrity header])
    file_ = std::make_unique<H5::H5File>(partial_path_, H5F_ACC_TRUNC, create, access);
  } catch (const H5::Exception& e) {
    ::close(fd_);
    fs::remove(partial_path_);
    throw Error(concat("cannot create HDF5 file '", partial_path_, "' in memory: ", detail(e)));
  }
}

H5Writer::~H5Writer() {
  if (closed_) return;
  if (file_) {
    try {
      file_->close();
    } catch (...) {  // a destructor must not throw; the file was only in memory anyway
    }
  }
  if (fd_ >= 0) ::close(fd_);
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

// Writes all `size` bytes to `fd` (the file `name`), in pieces of at most 4 MiB, retrying short
// writes and interrupted calls.
void write_all(int fd, const std::string& name, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, std::min<size_t>(size - done, size_t{4} << 20));
    if (n < 0 && errno == EINTR) continue;
    TF_CHECK_INPUT(n > 0, "cannot write '", name, "': ", n < 0 ? std::strerror(errno) : "the write made no progress",
                   " (", done, " of ", size, " bytes written)");
    done += static_cast<size_t>(n);
  }
}

// Flushes the folder entry of a rename to disk.
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_CLOEXEC);
  TF_CHECK_INPUT(fd >= 0, "cannot open folder '", folder.string(), "' to flush it to disk: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  TF_CHECK_INPUT(rc == 0, "cannot flush folder '", folder.string(), "' to disk: ", std::strerror(saved));
}

}  // namespace

void H5Writer::close() {
  TF_CHECK(file_, "HDF5 file '", path_, "': close() called twice");
  try {
    file_->close();  // HDF5 hands the finished image to image_free (Note [writing through memory])
  } catch (const H5::Exception& e) {
    throw Error(concat("HDF5 file '", partial_path_, "': closing: ", detail(e)));
  }
  file_.reset();
  const size_t size = image_length(*image_, partial_path_);
  write_integrity_header(static_cast<char*>(image_->data), size);
  // Data to disk before the rename makes it visible, and the folder entry after it: otherwise a
  // power cut could leave the new name pointing at unwritten blocks.
  try {
    write_all(fd_, partial_path_, static_cast<const char*>(image_->data), size);
    image_.reset();
    TF_CHECK_INPUT(::fsync(fd_) == 0, "cannot flush '", partial_path_, "' to disk: ", std::strerror(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    TF_CHECK_INPUT(rc == 0, "cannot write '", partial_path_, "': ", std::strerror(errno));
    std::error_code ec;
    fs::rename(partial_path_, path_, ec);
    TF_CHECK_INPUT(!ec, "cannot move '", partial_path_, "' to '", path_, "': ", ec.message());
  } catch (const Error&) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    std::error_code ignored;
    fs::remove(partial_path_, ignored);  // a failed write leaves nothing behind
    closed_ = true;
    throw;
  }
  closed_ = true;  // in place: nothing left for the destructor to discard
  const fs::path folder = fs::path(path_).parent_path();
  sync_folder(folder.empty() ? fs::path(".") : folder);
}

}  // namespace tf

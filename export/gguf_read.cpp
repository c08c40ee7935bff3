// GGUF v3 reading (export/gguf_read.h).
#include "export/gguf_read.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "export/gguf.h"
#include "framework/error.h"

namespace tf::exporting {

namespace {

constexpr uint64_t kMaxCount = uint64_t{1} << 24;  // keys, tensors, array elements: far above any model's

class Cursor {
 public:
  Cursor(const std::string& bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}
  template <class T>
  T take() {
    need(sizeof(T), "a value");
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string take_string() {
    const uint64_t n = take<uint64_t>();
    need(n, "a string");
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    at_ += n;
  }
  size_t at() const { return at_; }
  void need(uint64_t n, const char* what) const {
    TF_CHECK_INPUT(n <= bytes_.size() - at_, name_, ": truncated GGUF file: ", what, " at byte ", at_, " needs ", n,
                   " bytes, ", bytes_.size() - at_, " remain");
  }

 private:
  const std::string& bytes_;
  std::string name_;
  size_t at_ = 0;
};

// Bytes of one value of a scalar GGUF type (gguf.h's GGUF_TYPE_*), 0 for string and array.
uint64_t scalar_bytes(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;  // u8, i8, bool
    case 2: case 3: return 2;          // u16, i16
    case 4: case 5: case 6: return 4;  // u32, i32, f32
    case 10: case 11: case 12: return 8;  // u64, i64, f64
    default: return 0;
  }
}

}  // namespace

bool is_gguf_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufContents read_gguf(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  TF_CHECK_INPUT(in, file.string(), ": cannot open the GGUF file");
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  const std::string name = file.string();
  Cursor c(bytes, name);
  TF_CHECK_INPUT(bytes.size() >= 4 && bytes.compare(0, 4, "GGUF") == 0, name, ": not a GGUF file (no GGUF magic)");
  c.skip(4, "the magic");
  const auto version = c.take<uint32_t>();
  TF_CHECK_INPUT(version == 3, name, ": GGUF version ", version, " is not supported (this build reads version 3)");
  const auto n_tensors = c.take<uint64_t>(), n_keys = c.take<uint64_t>();
  TF_CHECK_INPUT(n_tensors <= kMaxCount && n_keys <= kMaxCount, name, ": implausible GGUF counts (", n_tensors,
                 " tensors, ", n_keys, " keys)");
  GgufContents g;
  uint64_t alignment = 32;
  for (uint64_t k = 0; k < n_keys; ++k) {
    const std::string key = c.take_string();
    const auto type = c.take<uint32_t>();
    if (type == 8) {
      g.strings[key] = c.take_string();
    } else if (type == 9) {
      const auto element = c.take<uint32_t>();
      const auto count = c.take<uint64_t>();
      TF_CHECK_INPUT(count <= kMaxCount, name, ": key '", key, "': an array of ", count, " elements");
      if (element == 8) {
        for (uint64_t i = 0; i < count; ++i) c.take_string();
      } else {
        TF_CHECK_INPUT(scalar_bytes(element) > 0, name, ": key '", key, "': unknown array element type ", element);
        c.skip(count * scalar_bytes(element), "an array");
      }
    } else {
      TF_CHECK_INPUT(scalar_bytes(type) > 0, name, ": key '", key, "': unknown value type ", type);
      if (key == "general.alignment" && type == 4) alignment = c.take<uint32_t>();
      else c.skip(scalar_bytes(type), "a value");
    }
  }
  TF_CHECK_INPUT(alignment > 0 && alignment <= 4096 && (alignment & (alignment - 1)) == 0, name,
                 ": general.alignment ", alignment, " is not a power of two up to 4096");
  struct Info {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<Info> infos;
  for (uint64_t t = 0; t < n_tensors; ++t) {
    Info info{c.take_string(), {}, 0, 0};
    const auto dims = c.take<uint32_t>();
    TF_CHECK_INPUT(dims >= 1 && dims <= 4, name, ": tensor '", info.name, "' has ", dims, " dimensions");
    for (uint32_t d = 0; d < dims; ++d) {
      const auto ne = c.take<uint64_t>();
      TF_CHECK_INPUT(ne >= 1 && ne <= kMaxCount * 64, name, ": tensor '", info.name, "' has a dimension of ", ne);
      info.shape.insert(info.shape.begin(), static_cast<int64_t>(ne));  // the file's ne[0] is innermost
    }
    info.type = c.take<uint32_t>();
    info.offset = c.take<uint64_t>();
    infos.push_back(std::move(info));
  }
  const uint64_t data_start = (c.at() + alignment - 1) / alignment * alignment;
  for (const Info& info : infos) {
    uint64_t count = 1;
    for (const int64_t d : info.shape) count *= static_cast<uint64_t>(d);
    TF_CHECK_INPUT(count <= (uint64_t{1} << 34), name, ": tensor '", info.name, "' is implausibly large");
    uint64_t size = 0;
    if (info.type == static_cast<uint32_t>(GgufType::f32)) size = 4 * count;
    else if (info.type == static_cast<uint32_t>(GgufType::f16)) size = 2 * count;
    else if (info.type == static_cast<uint32_t>(GgufType::q8_0) && info.shape.back() % kQ8Block == 0)
      size = count / kQ8Block * (2 + kQ8Block);
    TF_CHECK_INPUT(size > 0, name, ": tensor '", info.name, "' has type ", info.type,
                   "; this build reads f32 (0), f16 (1) and q8_0 (8) with rows of whole blocks");
    TF_CHECK_INPUT(info.offset <= bytes.size() && data_start <= bytes.size() - info.offset &&
                       size <= bytes.size() - data_start - info.offset,
                   name, ": tensor '", info.name, "' lies outside the file (", size, " bytes at ", data_start + info.offset,
                   " of ", bytes.size(), ")");
    const char* p = bytes.data() + data_start + info.offset;
    GgufTensor tensor{info.shape, {}};
    if (info.type == static_cast<uint32_t>(GgufType::f32)) {
      tensor.values.resize(count);
      std::memcpy(tensor.values.data(), p, size);
    } else if (info.type == static_cast<uint32_t>(GgufType::f16)) {
      tensor.values = decode_f16({p, size});
    } else {
      tensor.values = decode_q8_0({p, size});
    }
    TF_CHECK_INPUT(g.tensors.emplace(info.name, std::move(tensor)).second, name, ": tensor '", info.name,
                   "' appears twice");
  }
  return g;
}

}  // namespace tf::exporting

// GGUF v3 writing (export/gguf.h).
#include "export/gguf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "framework/io/atomic_file.h"
#include "framework/error.h"

namespace tf::exporting {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;  // general.alignment's default

// GGUF's value types (gguf.h: GGUF_TYPE_*).
enum class ValueType : uint32_t { u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9, u64 = 10 };

class Bytes {
 public:
  template <class T>
  void put(T value) {
    const size_t at = out_.size();
    out_.resize(at + sizeof value);
    std::memcpy(out_.data() + at, &value, sizeof value);  // GGUF is little-endian, as is every machine we build for
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment, 0); }
  void append(const std::vector<char>& bytes) { out_.insert(out_.end(), bytes.begin(), bytes.end()); }
  const std::vector<char>& bytes() const { return out_; }

 private:
  std::vector<char> out_;
};

void put_value(Bytes& out, const GgufValue& value) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, uint32_t>) {
          out.put(ValueType::u32), out.put(v);
        } else if constexpr (std::is_same_v<V, int32_t>) {
          out.put(ValueType::i32), out.put(v);
        } else if constexpr (std::is_same_v<V, float>) {
          out.put(ValueType::f32), out.put(v);
        } else if constexpr (std::is_same_v<V, bool>) {
          out.put(ValueType::boolean), out.put(static_cast<uint8_t>(v));
        } else if constexpr (std::is_same_v<V, std::string>) {
          out.put(ValueType::string), out.put_string(v);
        } else if constexpr (std::is_same_v<V, uint64_t>) {
          out.put(ValueType::u64), out.put(v);
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          out.put(ValueType::array), out.put(ValueType::string), out.put(static_cast<uint64_t>(v.size()));
          for (const std::string& s : v) out.put_string(s);
        } else if constexpr (std::is_same_v<V, std::vector<float>>) {
          out.put(ValueType::array), out.put(ValueType::f32), out.put(static_cast<uint64_t>(v.size()));
          for (const float x : v) out.put(x);
        } else {
          static_assert(std::is_same_v<V, std::vector<int32_t>>);
          out.put(ValueType::array), out.put(ValueType::i32), out.put(static_cast<uint64_t>(v.size()));
          for (const int32_t x : v) out.put(x);
        }
      },
      value);
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::f32: return "f32";
    case GgufType::f16: return "f16";
    case GgufType::q8_0: return "q8_0";
  }
  return "?";
}

// IEEE 754 binary16 by bit arithmetic rather than the _Float16 extension, which clang before 15 does
// not offer on x86 (tests/tsan.sh builds with clang 14). binary32 -> binary16 keeps the sign, rebiases
// the exponent (127 - 15 = 112) and rounds the 23-bit mantissa to 10 bits, to nearest even.
uint16_t half_from_float(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu);  // NaN, made quiet
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (halfway above 65504, the largest): inf
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, a multiple of 2^-24 (exact scaling)
    const float units = std::bit_cast<float>(magnitude) * 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(units));  // to even; 1024 is 2^-14, the smallest normal
  }
  // Normal: round at bit 13 (add just under half, plus the kept lowest bit, so ties go to even); a
  // carry out of the mantissa moves into the exponent, as it should.
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

float float_from_half(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu, mantissa = half & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::vector<char> encode_f16(std::span<const float> values) {
  std::vector<char> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = half_from_float(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

std::vector<float> decode_f16(std::span<const char> bytes) {
  std::vector<float> out(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = float_from_half(h);
  }
  return out;
}

// Q8_0 (ggml-quants.c, quantize_row_q8_0_ref): a block is 2 bytes of f16 scale and 32 int8 values.
std::vector<char> encode_q8_0(std::span<const float> values) {
  TF_CHECK(values.size() % kQ8Block == 0, "encode_q8_0: ", values.size(), " values are not whole blocks of 32");
  std::vector<char> out(values.size() / kQ8Block * (2 + kQ8Block));
  char* o = out.data();
  for (size_t b = 0; b < values.size(); b += kQ8Block, o += 2 + kQ8Block) {
    float amax = 0;
    for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(values[b + j]));
    const float d = amax / 127.0f;
    const float inverse = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t scale = half_from_float(d);
    std::memcpy(o, &scale, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) o[2 + j] = static_cast<char>(static_cast<int8_t>(std::round(values[b + j] * inverse)));
  }
  return out;
}

std::vector<float> decode_q8_0(std::span<const char> bytes) {
  const size_t block_bytes = 2 + kQ8Block;
  std::vector<float> out(bytes.size() / block_bytes * kQ8Block);
  for (size_t b = 0; b < bytes.size() / block_bytes; ++b) {
    uint16_t scale_bits;
    std::memcpy(&scale_bits, bytes.data() + b * block_bytes, 2);
    const float scale = float_from_half(scale_bits);
    for (int64_t j = 0; j < kQ8Block; ++j)
      out[b * kQ8Block + j] = scale * static_cast<int8_t>(bytes[b * block_bytes + 2 + j]);
  }
  return out;
}

void GgufFile::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(key, std::move(value));
}

void GgufFile::add_tensor(const std::string& name, std::vector<int64_t> shape, std::span<const float> values,
                          GgufType type) {
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  TF_CHECK(!shape.empty() && count == static_cast<int64_t>(values.size()), "GgufFile: tensor '", name, "' has ",
           values.size(), " values for its shape");
  if (type == GgufType::q8_0)
    TF_CHECK_INPUT(shape.back() % kQ8Block == 0, "--type q8_0: tensor '", name, "' has rows of ", shape.back(),
                   " values, not a multiple of 32 (Q8_0 stores whole blocks of 32 per row); export with --type f16 "
                   "or f32, or give the model widths that are multiples of 32");
  Tensor t{name, std::move(shape), type, {}};
  if (type == GgufType::f32) t.data.assign(reinterpret_cast<const char*>(values.data()),
                                           reinterpret_cast<const char*>(values.data() + values.size()));
  else if (type == GgufType::f16) t.data = encode_f16(values);
  else t.data = encode_q8_0(values);
  tensors_.push_back(std::move(t));
}

void GgufFile::write(const std::filesystem::path& file) const {
  Bytes head;
  head.put(uint32_t{0x46554747});  // "GGUF" read as a little-endian uint32
  head.put(kVersion);
  head.put(static_cast<uint64_t>(tensors_.size()));
  head.put(static_cast<uint64_t>(metadata_.size()));
  for (const auto& [key, value] : metadata_) {
    head.put_string(key);
    put_value(head, value);
  }
  uint64_t offset = 0;  // of each tensor's data, from the data section's start
  for (const Tensor& t : tensors_) {
    head.put_string(t.name);
    head.put(static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) head.put(static_cast<uint64_t>(*d));  // ne[0] first
    head.put(static_cast<uint32_t>(t.type));
    head.put(offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  head.pad_to(kAlignment);
  AtomicFile out(file);
  out.write(head.bytes());
  for (const Tensor& t : tensors_) {
    out.write(t.data);
    out.pad(static_cast<size_t>((kAlignment - t.data.size() % kAlignment) % kAlignment));
  }
  out.commit();
}

}  // namespace tf::exporting

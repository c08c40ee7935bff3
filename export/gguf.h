// GGUF, the file format of llama.cpp (format version 3): a header, typed metadata (key -> value),
// tensor descriptions, then the tensors' data, each aligned to 32 bytes. The layout is llama.cpp's
// ggml/include/gguf.h; docs/export.md says how tapeformer's models map onto it.
//
//   GgufFile file;
//   file.set("general.architecture", std::string("llama"));
//   file.set("llama.block_count", uint32_t{4});
//   file.add_tensor("token_embd.weight", {V, C}, weights, GgufType::f32);  // dims as PyTorch gives them
//   file.write("model.gguf");   // atomic: a .partial file renamed when complete
//
// Dimensions are given outermost first, as a PyTorch tensor's shape; the file stores them innermost
// first (ggml's ne[0] is the row length), and write() reverses them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace tf::exporting {

// ggml's tensor types that tapeformer writes (ggml.h: GGML_TYPE_F32 = 0, F16 = 1, Q8_0 = 8).
enum class GgufType : uint32_t { f32 = 0, f16 = 1, q8_0 = 8 };
const char* gguf_type_name(GgufType type);  // "f32", "f16", "q8_0"
inline constexpr int64_t kQ8Block = 32;     // values per Q8_0 block: an f16 scale, then 32 int8

// A metadata value: one of GGUF's scalar types, a string, or an array of one of them.
using GgufValue = std::variant<uint32_t, int32_t, float, bool, std::string, uint64_t, std::vector<std::string>,
                               std::vector<float>, std::vector<int32_t>>;

class GgufFile {
 public:
  void set(const std::string& key, GgufValue value);
  // shape: outermost first; values: row-major, shape's product of them. Q8_0 needs a row length
  // (the last dimension) that is a multiple of 32 (ggml quantizes whole rows in blocks of 32).
  void add_tensor(const std::string& name, std::vector<int64_t> shape, std::span<const float> values, GgufType type);
  // Writes the file atomically: "<file>.partial", flushed, fsynced, renamed.
  void write(const std::filesystem::path& file) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    GgufType type;
    std::vector<char> data;  // already in the file's encoding
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

// One IEEE binary16 value as its bits (round to nearest even; overflow to inf; NaN stays NaN), and back.
uint16_t half_from_float(float value);
float float_from_half(uint16_t half);

// The encodings, row-major: IEEE half (round to nearest even), and ggml's Q8_0: per block of 32,
// d = max |x| / 127 as f16, then q = round(x / d) as int8 (ggml's quantize_row_q8_0_ref).
std::vector<char> encode_f16(std::span<const float> values);
std::vector<char> encode_q8_0(std::span<const float> values);
// Their inverses, for tests and for reading a file back.
std::vector<float> decode_f16(std::span<const char> bytes);
std::vector<float> decode_q8_0(std::span<const char> bytes);

}  // namespace tf::exporting

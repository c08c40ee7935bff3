// safetensors, Hugging Face's tensor file: an 8-byte little-endian header length N, N bytes of JSON
// (each tensor's dtype, shape and [begin, end) byte offsets into the data, plus "__metadata__", a map
// of strings), padded with spaces to a multiple of 8, then the tensors' bytes, row-major.
//
//   SafetensorsFile file;
//   file.add("model.embed_tokens.weight", {V, C}, values, SafetensorsType::f32);
//   file.set_metadata("format", "pt");
//   file.write("model.safetensors");   // atomic
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tf::exporting {

enum class SafetensorsType { f32, f16 };

class SafetensorsFile {
 public:
  void add(const std::string& name, std::vector<int64_t> shape, std::span<const float> values, SafetensorsType type);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void write(const std::filesystem::path& file) const;
  std::string header() const;  // the JSON, unpadded

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    SafetensorsType type;
    std::vector<char> data;
  };
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A JSON string literal of `text` (quotes, backslashes and control characters escaped).
std::string json_quote(const std::string& text);

}  // namespace tf::exporting

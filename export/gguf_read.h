// Reading a GGUF v3 file back (export/gguf.h writes it): its string metadata and its tensors as
// float32, for `train --init-from model.gguf`. A GGUF file is untrusted input: every count, length,
// offset and shape is checked against the file before it is used (InputError naming the file).
//
//   const GgufContents g = read_gguf("model.gguf");
//   g.strings.at("general.architecture");       // "llama"
//   g.tensors.at("token_embd.weight").values;   // f32, f16 and q8_0 decoded to float
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tf::exporting {

struct GgufTensor {
  std::vector<int64_t> shape;  // outermost first, as PyTorch writes it (the file's ne reversed)
  std::vector<float> values;
};

struct GgufContents {
  std::map<std::string, std::string> strings;  // the string-valued keys
  std::map<std::string, GgufTensor> tensors;
};

// True when the file begins with GGUF's magic.
bool is_gguf_file(const std::filesystem::path& file);
GgufContents read_gguf(const std::filesystem::path& file);

}  // namespace tf::exporting

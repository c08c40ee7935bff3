// safetensors writing (export/safetensors.h).
#include "export/safetensors.h"

#include <cstdio>
#include <cstring>

#include "export/gguf.h"
#include "framework/error.h"
#include "framework/io/atomic_file.h"

namespace tf::exporting {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void SafetensorsFile::add(const std::string& name, std::vector<int64_t> shape, std::span<const float> values,
                          SafetensorsType type) {
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  TF_CHECK(count == static_cast<int64_t>(values.size()), "SafetensorsFile: tensor '", name, "' has ", values.size(),
           " values for its shape");
  Tensor t{name, std::move(shape), type, {}};
  if (type == SafetensorsType::f16) {
    t.data = encode_f16(values);
  } else {
    t.data.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  }
  tensors_.push_back(std::move(t));
}

std::string SafetensorsFile::header() const {
  std::string json = "{";
  if (!metadata_.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata_) {
      if (!first) json += ',';
      json += json_quote(key);
      json += ':';
      json += json_quote(value);
      first = false;
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    if (json.size() > 1) json += ",";
    json += json_quote(t.name) + ":{\"dtype\":\"" + (t.type == SafetensorsType::f16 ? "F16" : "F32") + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ',';
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  return json + "}";
}

void SafetensorsFile::write(const std::filesystem::path& file) const {
  std::string json = header();
  json.resize((json.size() + 7) / 8 * 8, ' ');  // the data then starts 8-byte aligned
  const uint64_t length = json.size();
  char prefix[8];
  std::memcpy(prefix, &length, 8);  // little-endian, as every machine tapeformer builds for
  AtomicFile out(file);
  out.write(std::span<const char>(prefix, 8));
  out.write(json);
  for (const Tensor& t : tensors_) out.write(t.data);
  out.commit();
}

}  // namespace tf::exporting

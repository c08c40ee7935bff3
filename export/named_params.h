// A model's parameters by name, for the exporters' mappings (which name parameters by their dotted
// checkpoint names: "blocks.0.attn.qkv.weight").
#pragma once
#include <map>
#include <string>

#include "framework/error.h"
#include "layers/module.h"

namespace tf::exporting {

class NamedParams {
 public:
  explicit NamedParams(const layers::ParamList& params) {
    for (const auto& p : params) by_name_.emplace(p.name, p.tensor);
  }
  bool contains(const std::string& name) const { return by_name_.contains(name); }
  // The parameter (a handle on its storage); an internal error when the model has none of that name.
  const Tensor& operator()(const std::string& name) const {
    const auto it = by_name_.find(name);
    TF_CHECK(it != by_name_.end(), "export: the model has no parameter '", name, "'");
    return it->second;
  }

 private:
  std::map<std::string, Tensor> by_name_;
};

}  // namespace tf::exporting

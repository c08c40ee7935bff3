// Parameter lists, initialisation helpers and the forward context.
#include "layers/module.h"

#include <cstdio>
#include <sstream>

#include "framework/ops/dropout.h"
#include "framework/ops/shape.h"

namespace tf::layers {

void add_param(ParamList& out, const std::string& name, const Tensor& t, ParamKind kind) {
  if (!t.defined()) return;
  out.push_back({name, t, kind});
  if (t.name().empty()) t.impl().name = name;
}

int64_t count_parameters(const ParamList& params) {
  int64_t n = 0;
  for (const auto& p : params) n += p.tensor.numel();
  return n;
}

std::string summarize(const ParamList& params) {
  std::ostringstream out;
  size_t width = 10;
  for (const auto& p : params) width = std::max(width, p.name.size());
  char line[512];
  for (const auto& p : params) {
    std::snprintf(line, sizeof line, "%-*s  %-16s %12lld\n", static_cast<int>(width), p.name.c_str(),
                  p.tensor.shape().to_string().c_str(), static_cast<long long>(p.tensor.numel()));
    out << line;
  }
  std::snprintf(line, sizeof line, "%-*s  %-16s %12lld\n", static_cast<int>(width), "total", "",
                static_cast<long long>(count_parameters(params)));
  out << line;
  return out.str();
}

Tensor Init::normal(const Shape& shape, double std) {
  return (shapes_only ? Tensor::shape_only(shape, dtype) : randn(shape, rng, std, dtype)).set_requires_grad();
}
Tensor Init::uniform(const Shape& shape, double low, double high) {
  return (shapes_only ? Tensor::shape_only(shape, dtype) : rand_uniform(shape, rng, low, high, dtype)).set_requires_grad();
}
Tensor Init::from_values(const Shape& shape, const std::function<double(int64_t)>& value) {
  if (shapes_only) return Tensor::shape_only(shape, dtype).set_requires_grad();
  std::vector<double> values(shape.numel());
  for (int64_t i = 0; i < shape.numel(); ++i) values[i] = value(i);
  return Tensor::from_vector(values, shape, dtype).set_requires_grad();
}
Tensor Init::zeros(const Shape& shape) {
  return (shapes_only ? Tensor::shape_only(shape, dtype) : Tensor::zeros(shape, dtype)).set_requires_grad();
}
Tensor Init::ones(const Shape& shape) {
  return (shapes_only ? Tensor::shape_only(shape, dtype) : Tensor::full(shape, 1.0, dtype)).set_requires_grad();
}

uint64_t Context::next_seed() const {
  TF_CHECK(rng, "dropout in training mode needs a random generator in the forward context");
  return rng->next_u64();
}

Context Context::in_block(int64_t i) const {
  Context c = *this;
  c.layer = i;
  return c;
}

Tensor Context::head_gate() const {
  if (!head_gates) return Tensor();
  TF_CHECK(layer >= 0 && layer < static_cast<int64_t>(head_gates->size()), "Context: head_gates holds ",
           head_gates->size(), " layers' gates, but layer ", layer, " is running");
  return (*head_gates)[static_cast<size_t>(layer)];
}

Tensor per_chunk(const Tensor& x, int axis, const SequenceShard* shard, int64_t offset,
                 const std::function<Tensor(const Tensor&, int64_t)>& f) {
  if (!shard) return f(x, offset);
  if (shard->chunk_starts.size() == 1) return f(x, shard->chunk_starts[0]);
  const std::vector<int64_t> sizes(shard->chunk_starts.size(), shard->chunk_len);
  const auto pieces = ops::split(x, sizes, axis);
  std::vector<Tensor> done;
  for (size_t c = 0; c < pieces.size(); ++c) done.push_back(f(pieces[c], shard->chunk_starts[c]));
  return ops::concat(done, axis);
}

Tensor dropout(const Tensor& x, double p, const Context& ctx) {
  if (!ctx.training || p == 0.0) return x;
  return ops::dropout(x, p, ctx.next_seed());
}

}  // namespace tf::layers

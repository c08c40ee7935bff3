// KV cache; see kv_cache.h.
#include "layers/kv_cache.h"

#include <algorithm>
#include <cstring>

namespace tf::layers {

KvCache::KvCache(const Options& o) : options_(o) {
  TF_CHECK(o.n_layers > 0 && o.batch > 0 && o.kv_heads > 0 && o.capacity > 0 && o.head_dim > 0,
           "KvCache: n_layers, batch, kv_heads, capacity and head_dim must be positive, got ", o.n_layers, ", ",
           o.batch, ", ", o.kv_heads, ", ", o.capacity, ", ", o.head_dim);
  TF_CHECK(o.dtype != DType::i32, "KvCache: keys and values are floating point, got i32");
  TF_CHECK(o.window >= 0 && (o.window == 0 || o.window <= o.capacity), "KvCache: the window ", o.window,
           " must be >= 0 and fit the capacity ", o.capacity);
  TF_CHECK(o.kv_heads_per_layer.empty() || static_cast<int64_t>(o.kv_heads_per_layer.size()) == o.n_layers,
           "KvCache: kv_heads_per_layer lists ", o.kv_heads_per_layer.size(), " layers, not n_layers ", o.n_layers);
  TF_CHECK(o.recurrent_states.empty() || static_cast<int64_t>(o.recurrent_states.size()) == o.n_layers,
           "KvCache: recurrent_states lists ", o.recurrent_states.size(), " layers, not n_layers ", o.n_layers);
  TF_CHECK(o.differential.empty() || static_cast<int64_t>(o.differential.size()) == o.n_layers,
           "KvCache: differential lists ", o.differential.size(), " layers, not n_layers ", o.n_layers);
  TF_CHECK(o.conv_states.empty() || static_cast<int64_t>(o.conv_states.size()) == o.n_layers,
           "KvCache: conv_states lists ", o.conv_states.size(), " layers, not n_layers ", o.n_layers);
  layers_.resize(o.n_layers);
  // Zeros rather than empty(): the rows past length() are never read, but a kernel that swept a
  // whole buffer would then meet finite numbers, not whatever the allocator left.
  for (int64_t l = 0; l < o.n_layers; ++l) {
    if (recurrent(l)) {
      layers_[l].state = Tensor::zeros(o.recurrent_states[l], o.dtype);
      if (!o.conv_states.empty() && o.conv_states[l].rank() > 0)
        layers_[l].conv_state = Tensor::zeros(o.conv_states[l], o.dtype);
      continue;
    }
    const int64_t G = kv_heads(l);
    TF_CHECK(G > 0, "KvCache: layer ", l, " has ", G, " key/value heads");
    if (differential(l)) {
      TF_CHECK(G % 2 == 0, "KvCache: differential layer ", l, " needs an even number of key/value heads, got ", G);
      layers_[l].keys = Tensor::zeros({o.batch, G / 2, o.capacity, o.head_dim}, o.dtype);         // (B, G/2, L, D)
      layers_[l].second_keys = Tensor::zeros({o.batch, G / 2, o.capacity, o.head_dim}, o.dtype);  // (B, G/2, L, D)
      layers_[l].values = Tensor::zeros({o.batch, G / 2, o.capacity, 2 * o.head_dim}, o.dtype);   // (B, G/2, L, 2D)
      continue;
    }
    layers_[l].keys = Tensor::zeros({o.batch, G, o.capacity, o.head_dim}, o.dtype);    // (B, G, L, D)
    layers_[l].values = Tensor::zeros({o.batch, G, o.capacity, o.head_dim}, o.dtype);  // (B, G, L, D)
  }
}

int64_t KvCache::kv_heads(int64_t layer) const {
  return options_.kv_heads_per_layer.empty() ? options_.kv_heads
                                             : options_.kv_heads_per_layer.at(static_cast<size_t>(layer));
}

ops::KvBuffers KvCache::layer(int64_t layer) const {
  TF_CHECK(layer >= 0 && layer < options_.n_layers, "KvCache: layer ", layer, " out of range for ",
           options_.n_layers, " layers");
  const Layer& buffers = layers_[layer];
  return {buffers.keys, buffers.values, rows_, length_, buffers.state, buffers.second_keys, buffers.conv_state};
}

bool KvCache::recurrent(int64_t layer) const {
  return !options_.recurrent_states.empty() && options_.recurrent_states[layer].rank() > 0;
}

bool KvCache::differential(int64_t layer) const {
  return !options_.differential.empty() && options_.differential[layer];
}

void KvCache::clear() {
  length_ = rows_ = 0;
  for (Layer& layer : layers_)
    for (Tensor* state : {&layer.state, &layer.conv_state})
      if (state->defined()) state->fill(0.0);
}

int64_t KvCache::max_chunk() const {
  return options_.window > 0 ? options_.capacity - (options_.window - 1) : options_.capacity;
}

void KvCache::make_room(int64_t t) {
  TF_CHECK(t >= 0 && t <= max_chunk(), "KvCache: a chunk of ", t, " positions exceeds the ", max_chunk(),
           " one call may append");
  if (options_.window == 0 || rows_ + t <= options_.capacity) return;
  // Keep rows rows_ - kept .. rows_ - 1 of every head, moved to the front: what the next query sees.
  const int64_t kept = std::min(rows_, options_.window - 1), drop = rows_ - kept;
  const int64_t L = options_.capacity;
  for (int64_t l = 0; l < options_.n_layers; ++l)
    for (Tensor* buffer : {&layers_[l].keys, &layers_[l].second_keys, &layers_[l].values}) {
      if (!buffer->defined()) continue;  // a recurrent layer, or a layer with one map
      const int64_t heads = buffer->dim(0) * buffer->dim(1);
      const size_t row_bytes = buffer->dim(3) * dtype_size(options_.dtype);
      auto* base = static_cast<std::byte*>(buffer->raw_data());
      for (int64_t h = 0; h < heads; ++h)
        std::memmove(base + h * L * row_bytes, base + (h * L + drop) * row_bytes, kept * row_bytes);
    }
  rows_ = kept;
}

void KvCache::advance(int64_t t) {
  TF_CHECK(t >= 0 && rows_ + t <= options_.capacity, "KvCache: cannot advance ", rows_, " rows by ", t,
           " past the capacity ", options_.capacity);
  rows_ += t;
  length_ += t;
}

}  // namespace tf::layers

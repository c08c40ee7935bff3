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
  layers_.resize(o.n_layers);
  // Zeros rather than empty(): the rows past length() are never read, but a kernel that swept a
  // whole buffer would then meet finite numbers, not whatever the allocator left.
  for (Layer& layer : layers_) {
    layer.keys = Tensor::zeros({o.batch, o.kv_heads, o.capacity, o.head_dim}, o.dtype);    // (B, G, L, D)
    layer.values = Tensor::zeros({o.batch, o.kv_heads, o.capacity, o.head_dim}, o.dtype);  // (B, G, L, D)
  }
}

ops::KvBuffers KvCache::layer(int64_t layer) const {
  TF_CHECK(layer >= 0 && layer < options_.n_layers, "KvCache: layer ", layer, " out of range for ",
           options_.n_layers, " layers");
  return {layers_[layer].keys, layers_[layer].values, rows_, length_};
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
  const int64_t heads = options_.batch * options_.kv_heads, L = options_.capacity;
  const size_t row_bytes = options_.head_dim * dtype_size(options_.dtype);
  for (Layer& layer : layers_)
    for (Tensor* buffer : {&layer.keys, &layer.values}) {
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

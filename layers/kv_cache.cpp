// KV cache; see kv_cache.h.
#include "layers/kv_cache.h"

namespace tf::layers {

KvCache::KvCache(const Options& o) : options_(o) {
  TF_CHECK(o.n_layers > 0 && o.batch > 0 && o.kv_heads > 0 && o.capacity > 0 && o.head_dim > 0,
           "KvCache: n_layers, batch, kv_heads, capacity and head_dim must be positive, got ", o.n_layers, ", ",
           o.batch, ", ", o.kv_heads, ", ", o.capacity, ", ", o.head_dim);
  TF_CHECK(o.dtype != DType::i32, "KvCache: keys and values are floating point, got i32");
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
  return {layers_[layer].keys, layers_[layer].values, length_};
}

void KvCache::advance(int64_t t) {
  TF_CHECK(t >= 0 && length_ + t <= options_.capacity, "KvCache: cannot advance ", length_, " positions by ", t,
           " past the capacity ", options_.capacity);
  length_ += t;
}

}  // namespace tf::layers

// Masks and score modifiers of an attention call (kernels/reference/attention_variant.h).
#include "framework/kernels/reference/attention_variant.h"

#include <cmath>
#include <vector>

#include "framework/random.h"

namespace tf::kernels {

std::vector<std::string> variant_keys_used(const AttentionVariant& v, bool only_unsupported_by_ring) {
  std::vector<std::string> keys;
  for (const VariantOption& o : kVariantOptions)
    if (o.used(v) && !(only_unsupported_by_ring && o.ring)) keys.push_back(o.key);
  return keys;
}

double alibi_slope(int64_t h, int64_t heads) {
  int64_t n = 1;  // the largest power of two <= heads
  while (2 * n <= heads) n *= 2;
  if (h < n) return std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n));
  return std::exp2(-4.0 * static_cast<double>(2 * (h - n) + 1) / static_cast<double>(n));
}

int64_t t5_bucket(int64_t n, bool bidirectional, int64_t buckets, int64_t max_distance) {
  int64_t bucket = 0, nb = buckets;
  if (bidirectional) {
    nb /= 2;
    if (n < 0) bucket = nb;  // keys after the query: the upper half
    n = n < 0 ? -n : n;
  } else {
    n = n < 0 ? 0 : n;
  }
  const int64_t exact = nb / 2;
  if (n < exact) return bucket + n;
  const double spread = std::log(static_cast<double>(n) / exact) / std::log(static_cast<double>(max_distance) / exact);
  const auto large = exact + static_cast<int64_t>(spread * static_cast<double>(nb - exact));
  return bucket + (large < nb - 1 ? large : nb - 1);
}

void relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len, int32_t* out) {
  if (variant.relative_buckets <= 0) return;
  for (int64_t n = -(kv_len - 1); n < kv_len; ++n)
    out[n + kv_len - 1] = static_cast<int32_t>(t5_bucket(n, !causal, variant.relative_buckets, variant.relative_max_distance));
}

std::vector<int32_t> relative_bucket_table(const AttentionVariant& variant, bool causal, int64_t kv_len) {
  if (variant.relative_buckets <= 0 || kv_len <= 0) return {};
  std::vector<int32_t> table(2 * kv_len - 1);
  relative_bucket_table(variant, causal, kv_len, table.data());
  return table;
}

namespace {

// BigBird: whether key block kb is one of query block qb's random blocks. The r draws depend on
// (seed, qb, draw) only, so a decoding step sees the blocks the full forward saw; causal draws pick
// among blocks 0 .. qb, bidirectional ones among all `blocks`.
bool random_block(int64_t random_blocks, uint64_t seed, bool causal, int64_t qb, int64_t kb, int64_t blocks) {
  const int64_t choices = causal ? qb + 1 : blocks;
  for (int64_t r = 0; r < random_blocks; ++r) {
    const auto e = static_cast<uint64_t>(qb * random_blocks + r);
    if (static_cast<int64_t>(uniform_at(seed, e) * static_cast<double>(choices)) == kb) return true;
  }
  return false;
}

}  // namespace

bool AttentionMask::sparse_allowed(const AttentionDims& d, int64_t i, int64_t j) const {
  if (j >= window_begin(d, i) && j < window_end(d, i)) return true;
  const int64_t p = query_position(d, i), g = global_tokens;
  if (causal && j > p) return false;
  if (j < g || p < g) return true;  // Longformer's global tokens
  if (random_blocks <= 0) return false;
  const int64_t bs = sparse_block, blocks = (d.kv_len + bs - 1) / bs;
  return random_block(random_blocks, random_seed, causal, p / bs, j / bs, blocks);
}

bool AttentionMask::block_allowed(const AttentionDims& d, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
  if (!sparse() || i0 >= i1 || j0 >= j1) return i0 < i1 && j0 < j1;
  const int64_t p0 = query_position(d, i0), p1 = query_position(d, i1 - 1), g = global_tokens;
  if (causal && j0 > p1) return false;
  if (j0 < g || p0 < g) return true;
  if (window_begin(d, i0) < j1 && window_end(d, i1 - 1) > j0) return true;  // the runs move right with i
  if (random_blocks <= 0) return false;
  const int64_t bs = sparse_block, blocks = (d.kv_len + bs - 1) / bs;
  for (int64_t qb = p0 / bs; qb <= p1 / bs; ++qb)
    for (int64_t kb = j0 / bs; kb <= (j1 - 1) / bs; ++kb)
      if (random_block(random_blocks, random_seed, causal, qb, kb, blocks)) return true;
  return false;
}

}  // namespace tf::kernels

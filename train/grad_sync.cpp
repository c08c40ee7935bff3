// Gradients over micro-batches and ranks; see grad_sync.h.
#include "train/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "framework/autograd/tape.h"

namespace tf::train {

namespace {

TensorImpl* grad_of(const Tensor& p) { return p.impl().grad_slot->grad.get(); }

const float* values_of(const TensorImpl* g) {
  return g ? reinterpret_cast<const float*>(g->storage->data) + g->offset : nullptr;
}

// sum[j] = earlier[j] + now[j] (Note [micro-batch sums]); a missing gradient counts as zeros.
void add_into(float* sum, const float* earlier, const float* now, int64_t n) {
  if (earlier && now) {
    for (int64_t j = 0; j < n; ++j) sum[j] = earlier[j] + now[j];
  } else if (earlier || now) {
    std::memcpy(sum, earlier ? earlier : now, static_cast<size_t>(n) * sizeof(float));
  } else {
    std::fill(sum, sum + n, 0.0f);
  }
}

}  // namespace

GradientSync::GradientSync(std::vector<Tensor> params, dist::Comm& comm, Options options)
    : comm_(comm), options_(options) {
  // Bucket order is the reverse of registration: embeddings come first in a model's parameter list
  // and their gradients are the last to be final.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->requires_grad()) continue;
    TF_CHECK(it->dtype() == DType::f32 && it->impl().grad_slot, "GradientSync: ", it->describe(),
             " is not a float32 parameter");
    params_.push_back(*it);
  }
  const int64_t n = static_cast<int64_t>(params_.size());
  impl_uses_.assign(params_.size(), 0);
  slot_uses_.assign(params_.size(), 0);
  stash_.resize(params_.size());
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    offsets_.push_back(total);
    const int64_t size = params_[i].numel();
    if (buckets_.empty() || buckets_.back().count * 4 >= options_.bucket_bytes)
      buckets_.push_back({i, i, total, 0, {}});
    buckets_.back().last = i + 1;
    buckets_.back().count += size;
    total += size;
  }
  if (comm_.size() > 1) {
    values_.resize(static_cast<size_t>(total));
    if (options_.fixed_order) gathered_.resize(static_cast<size_t>(total) * static_cast<size_t>(comm_.size()));
  }
}

GradientSync::~GradientSync() {
  tape().set_node_done_hook(nullptr, nullptr);
  for (Bucket& b : buckets_) b.request.wait();
}

void GradientSync::begin_micro(int64_t local_index, int64_t local_count) {
  if (local_index > 0)
    for (size_t i = 0; i < params_.size(); ++i) stash_[i] = std::move(params_[i].impl().grad_slot->grad);
  if (comm_.size() == 1 || local_index + 1 < local_count) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    impl_uses_[i] = params_[i].impl_ptr().use_count();
    slot_uses_[i] = params_[i].impl().grad_slot.use_count();
  }
  next_bucket_ = 0;
  tape().set_node_done_hook(&GradientSync::on_node_done, this);
}

void GradientSync::end_micro(int64_t local_index, int64_t local_count) {
  if (comm_.size() == 1 || local_index + 1 < local_count) {
    if (local_index == 0) return;
    for (size_t i = 0; i < params_.size(); ++i) {  // Note [micro-batch sums]
      std::shared_ptr<TensorImpl> earlier = std::move(stash_[i]);
      std::shared_ptr<TensorImpl>& now = params_[i].impl().grad_slot->grad;
      if (!now) now = std::move(earlier);
      else if (earlier) add_into(reinterpret_cast<float*>(now->storage->data) + now->offset, values_of(earlier.get()),
                                 values_of(now.get()), params_[i].numel());
    }
    return;
  }
  tape().set_node_done_hook(nullptr, nullptr);
  const int64_t during = static_cast<int64_t>(next_bucket_);
  launch_ready_buckets(true);
  stats_.buckets_during_backward += during;
  stats_.buckets_after_backward += static_cast<int64_t>(buckets_.size()) - during;
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) b.request.wait();
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  unpack();
}

void GradientSync::abandon() {
  tape().set_node_done_hook(nullptr, nullptr);
  for (Bucket& b : buckets_) b.request.wait();
  for (auto& s : stash_) s.reset();
}

void GradientSync::on_node_done(void* self) { static_cast<GradientSync*>(self)->launch_ready_buckets(false); }

bool GradientSync::gradient_final(int64_t i) const {
  const Tensor& p = params_[static_cast<size_t>(i)];
  return p.impl_ptr().use_count() <= impl_uses_[static_cast<size_t>(i)] &&
         p.impl().grad_slot.use_count() <= slot_uses_[static_cast<size_t>(i)];
}

void GradientSync::launch_ready_buckets(bool all) {
  for (size_t b = 0; b < next_bucket_; ++b) buckets_[b].request.test();  // progress those in flight
  while (next_bucket_ < buckets_.size()) {
    Bucket& bucket = buckets_[next_bucket_];
    if (!all)
      for (int64_t i = bucket.first; i < bucket.last; ++i)
        if (!gradient_final(i)) return;
    launch(bucket);
    ++next_bucket_;
  }
}

void GradientSync::launch(Bucket& b) {
  for (int64_t i = b.first; i < b.last; ++i) {
    const size_t k = static_cast<size_t>(i);
    add_into(values_.data() + offsets_[k], values_of(stash_[k].get()), values_of(grad_of(params_[k])),
             params_[k].numel());
    stash_[k].reset();
  }
  float* mine = values_.data() + b.offset;
  b.request = options_.fixed_order
                  ? comm_.iallgather(mine, b.count, gathered_.data() + b.offset * comm_.size())
                  : comm_.iallreduce_sum(mine, b.count);
  stats_.bytes_sent += b.count * static_cast<int64_t>(sizeof(float));
}

void GradientSync::unpack() {
  const int64_t ranks = comm_.size();
  if (options_.fixed_order) {  // rank after rank: ((g_0 + g_1) + g_2) + ... (Note [micro-batch sums])
    for (const Bucket& b : buckets_) {
      const float* all = gathered_.data() + b.offset * ranks;  // (ranks, b.count)
      float* sum = values_.data() + b.offset;
      std::memcpy(sum, all, static_cast<size_t>(b.count) * sizeof(float));
      for (int64_t r = 1; r < ranks; ++r)
        for (int64_t j = 0; j < b.count; ++j) sum[j] += all[r * b.count + j];
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    std::shared_ptr<TensorImpl>& g = params_[i].impl().grad_slot->grad;
    if (!g) g = Tensor::empty(params_[i].shape(), DType::f32).impl_ptr();
    std::memcpy(reinterpret_cast<float*>(g->storage->data) + g->offset, values_.data() + offsets_[i],
                static_cast<size_t>(params_[i].numel()) * sizeof(float));
  }
}

}  // namespace tf::train

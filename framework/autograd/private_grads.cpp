// Private parameter gradients; see private_grads.h.
#include "framework/autograd/private_grads.h"

#include <algorithm>

#include "framework/error.h"

namespace tf {

namespace {
thread_local PrivateGradients* g_current = nullptr;
}  // namespace

PrivateGradients::PrivateGradients(std::span<const Tensor> params)
    : params_(params.begin(), params.end()), twins_(params.size()) {
  for (size_t i = 0; i < params_.size(); ++i) {
    TF_CHECK(params_[i].requires_grad() && params_[i].impl().grad_slot,
             "PrivateGradients: ", params_[i].describe(), " does not require grad");
    by_slot_.emplace_back(params_[i].impl().grad_slot.get(), i);
  }
  std::sort(by_slot_.begin(), by_slot_.end());
}

PrivateGradients::Scope::Scope(PrivateGradients& gradients) : previous_(g_current) { g_current = &gradients; }
PrivateGradients::Scope::~Scope() { g_current = previous_; }

GradSlot& PrivateGradients::target(GradSlot& slot) {
  if (!g_current) return slot;
  const auto& index = g_current->by_slot_;
  const auto it = std::lower_bound(index.begin(), index.end(), std::pair<GradSlot*, size_t>(&slot, 0));
  return it != index.end() && it->first == &slot ? g_current->twins_[it->second] : slot;
}

void PrivateGradients::add_to_parameter(size_t i) {
  GradSlot& twin = twins_[i];
  if (!twin.grad) return;
  GradSlot& own = *params_[i].impl().grad_slot;
  if (!own.grad) {
    own.grad = std::move(twin.grad);
    return;
  }
  const Tensor sum(own.grad), part(twin.grad);
  dispatch(part.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* s = sum.data<T>();
    const T* p = part.data<T>();
    for (int64_t k = 0, n = part.numel(); k < n; ++k) s[k] += p[k];
  });
  twin.grad.reset();
}

void PrivateGradients::discard() {
  for (GradSlot& twin : twins_) twin.grad.reset();
}

}  // namespace tf

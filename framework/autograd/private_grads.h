// Private parameter gradients: several threads run forward and backward on parts of one batch at
// once without adding into the same parameter gradient (Note [batch-split threads] in
// train/thread_split.h).
//
// While a PrivateGradients::Scope is alive on a thread, accumulate_grad on that thread sends what it
// would add to a listed parameter's gradient slot to the scope's own twin of that slot instead; other
// tensors' slots (activations, each thread's own) are untouched. After every thread is done, one
// thread adds the twins into the parameters, in a fixed order, so that the sum does not depend on
// which thread finished first.
//
//   std::vector<PrivateGradients> parts(threads, PrivateGradients(params));
//   #pragma omp parallel
//   { PrivateGradients::Scope scope(parts[thread]); backward(loss_of_my_rows); }
//   for (size_t i = 0; i < params.size(); ++i)
//     for (auto& part : parts) part.add_to_parameter(i);   // thread 0's first, then 1's, ...
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "framework/tensor.h"

namespace tf {

class PrivateGradients {
 public:
  explicit PrivateGradients(std::span<const Tensor> params);

  class Scope {
   public:
    explicit Scope(PrivateGradients& gradients);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PrivateGradients* previous_;
  };

  size_t size() const { return params_.size(); }
  // Adds params[i]'s private gradient into the parameter's own (which takes it over when it has
  // none yet) and leaves the private one empty. Does nothing when this part reached no gradient.
  void add_to_parameter(size_t i);
  // Empties every private gradient (after an error: what a part reached is not added).
  void discard();

  // The slot that accumulate_grad on this thread writes to instead of `slot`: its private twin
  // inside a Scope that lists it, else `slot` itself.
  static GradSlot& target(GradSlot& slot);

 private:
  std::vector<Tensor> params_;
  std::vector<GradSlot> twins_;          // twins_[i] stands in for params_[i]'s slot
  std::vector<std::pair<GradSlot*, size_t>> by_slot_;  // (a parameter's slot, i), sorted: the lookup
};

}  // namespace tf

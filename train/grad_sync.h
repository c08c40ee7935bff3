// Gradients over micro-batches and ranks: what one optimizer step's gradient is when it comes
// from train.grad_accum micro-batches spread over the ranks of `mpirun -np N` (docs/distributed.md).
//
//   GradientSync sync(params, dist::Comm::world(), {});
//   for (local micro-batch i of k) {
//     sync.begin_micro(i, k);      // before the forward
//     backward(loss_i);            // buckets of final gradients start their all-reduce meanwhile
//     sync.end_micro(i, k);        // after the last one, every rank holds the same summed gradient
//   }
//
// Note [micro-batch sums]: each micro-batch's gradient is computed on its own (the previous sum is
// taken out of the parameter before its backward) and then added: the step's gradient is
// ((g_0 + g_1) + g_2) + ... in micro-batch order, whatever the rank count. One process with
// grad_accum N and N ranks with one micro-batch each then add the same numbers in the same order
// when the ranks' gradients are summed in rank order (Options::fixed_order: gathered, then added
// here, for bit-identical runs with train.deterministic). MPI's own all-reduce sums in an order of
// its choosing (exact for 2 ranks, where a + b = b + a; otherwise within rounding).
//
// Note [final gradients]: a bucket's all-reduce may start once no node left on the tape can add to
// any of its parameters. A node can add to a parameter only through a handle on its TensorImpl or
// on its gradient slot; the tape destroys each node right after it has run (the hook of
// Tape::set_node_done_hook), so a parameter's gradient is final once both handle counts are back to
// what they were before the forward. The test is conservative: a handle held elsewhere only delays
// the bucket to the end of backward. Buckets start strictly in order (MPI requires every rank to
// issue collectives in the same order), last layers first, as backward reaches them.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/dist/comm.h"
#include "framework/tensor.h"

namespace tf::train {

class GradientSync {
 public:
  struct Options {
    int64_t bucket_bytes = 1 << 20;  // 1 MiB: a few buckets for the shipped models
    bool fixed_order = false;        // Note [micro-batch sums]: gather, then add in rank order
  };
  struct Stats {
    double wait_seconds = 0;  // time spent waiting for all-reduces after backward, summed over steps
    int64_t buckets_during_backward = 0, buckets_after_backward = 0;
    int64_t bytes_sent = 0;   // gradient bytes handed to MPI on this rank (its payload, not the wire's)
  };

  GradientSync(std::vector<Tensor> params, dist::Comm& comm, Options options);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void begin_micro(int64_t local_index, int64_t local_count);
  void end_micro(int64_t local_index, int64_t local_count);
  // After an error between begin_micro and end_micro: unhook from the tape and drop what is pending.
  void abandon();
  const Stats& stats() const { return stats_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    int64_t first, last;            // params [first, last) in bucket order (reverse registration)
    int64_t offset, count;          // its floats in values_
    dist::Request request;
  };
  static void on_node_done(void* self);
  void launch_ready_buckets(bool all);
  void launch(Bucket& b);
  bool gradient_final(int64_t i) const;
  void unpack();

  std::vector<Tensor> params_;            // in bucket order
  std::vector<int64_t> offsets_;          // params_[i]'s first float in values_
  std::vector<long> impl_uses_, slot_uses_;  // handle counts before the forward (Note [final gradients])
  std::vector<std::shared_ptr<TensorImpl>> stash_;  // the sum of earlier micro-batches' gradients
  std::vector<Bucket> buckets_;
  std::vector<float> values_;             // every gradient, packed (this rank's, then the sum)
  std::vector<float> gathered_;           // fixed_order: every rank's values_, rank after rank
  size_t next_bucket_ = 0;
  dist::Comm& comm_;
  Options options_;
  Stats stats_;
};

}  // namespace tf::train

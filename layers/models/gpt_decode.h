// One decoding step of a GPT (batch 1, one new token, float32) in a single OpenMP parallel region:
// the fast path of Gpt::logits_cached for the step it is called for ~all of the time when sampling.
//
//   if (fused_decode_applies(model, cache, x)) logits = decode_step_fused(model, x, cache);  // (1, 1, V)
//
// The op path runs a decoding step as ~10 ops per block, each a parallel region of its own (or a
// serial loop: attention_step_fast over the heads) around gemvs that stream every weight once.
// Here each thread owns a fixed share of every weight and the threads meet twice per block; see
// Note [fused decoding step] in gpt_decode.cpp for the split and the figures that earned it.
#pragma once
#include "layers/models/gpt.h"

namespace tf::layers {

// True when decode_step_fused computes what the op path would, for x (B, T, C) about to run
// through `model` at cache.length(): B = T = 1, float32 on the fast kernels, causal attention
// without RoPE (the op path rotates queries and keys; this one does not), inference (no grad).
bool fused_decode_applies(const Gpt& model, const KvCache& cache, const Tensor& x);

// x (1, 1, C): the embedded token (token plus position embedding) at position cache.length().
// Runs every block, writes each layer's key and value row into the cache (the caller advances it),
// and returns the logits (1, 1, V). Equal to the op path up to float32 summation order.
Tensor decode_step_fused(const Gpt& model, const Tensor& x, KvCache& cache);

// While one lives, fused_decode_applies() is false on this thread: Gpt::logits_cached takes the op
// path for every step. For tests and bench/decode.cpp, which compare the two paths.
class UnfusedDecodeGuard {
 public:
  UnfusedDecodeGuard();
  ~UnfusedDecodeGuard();
  UnfusedDecodeGuard(const UnfusedDecodeGuard&) = delete;
  UnfusedDecodeGuard& operator=(const UnfusedDecodeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tf::layers

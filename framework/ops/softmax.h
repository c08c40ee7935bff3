// softmax and log_softmax over the last axis, numerically stable (the row maximum is subtracted).
//
//   Tensor probs = ops::softmax(scores);          // (B, H, T, T), each row sums to 1
//   Tensor logprobs = ops::log_softmax(logits);   // (B, T, V)
//
// For a loss over classes prefer ops::cross_entropy, which fuses log_softmax with the target pick.
#pragma once
#include "framework/tensor.h"

namespace tf::ops {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

}  // namespace tf::ops

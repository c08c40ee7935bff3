// Tiled ("flash") float32 attention: the same interface and results as attention_forward_fast /
// attention_backward_fast (kernels/cpu/attention.h), without ever forming the (B, H, T_q, T_k) scores.
//
// After Dao et al. 2022, "FlashAttention": the forward (their Algorithm 1) walks key blocks of
// Bc keys for each block of Br queries, keeping a running row max m and sum l and rescaling the
// output accumulator when m grows (the online softmax, Milakov & Gimelshein 2018); it saves only
// lse = m + log l, the same lse the materialised kernel saves. The backward (their Algorithm 4)
// recomputes each score block from Q, K and lse, with delta = rowsum(dO * O) formed once up front.
// Key blocks outside the visible run [key_begin(i), key_end(i)) of every row of a query block
// (Note [attention masks]) are skipped, and so are key blocks whose keys are all padding: under a
// causal mask that is the upper triangle, about half the work. Dropout is supported with the same
// counter-based mask (attention_dropout_factor of P's element e), so results match the reference.
//
// Scratch is O(threads Br Bc) block buffers, plus in backward delta (B, H, T_q) and, when there
// are fewer than 8 (batch, kv head) pairs to share among threads, partial dQ sums (see
// Note [flash determinism] in the .cpp). Results are bit-identical run to run and for any thread
// count: no task's arithmetic depends on which thread runs it or when.
//
//   if (flash_attention_preferred(a.dims, a.mask)) flash_attention_forward(a);
//
// Blocks are Br = Bc = 64 with 6 x 16 register tiles (measured against 32 x 64, 64 x 32, 128 x 64
// and 4 x 16 tiles). Against the materialised kernel (bench/attention.cpp, forward + backward, one
// thread, process CPU time): see flash_attention_preferred in the .cpp for the figures and the rule.
#pragma once
#include <cstdint>

#include "framework/kernels/reference/attention.h"

namespace tf::kernels {

// Where an operand's rows sit, in floats: row i of head h of batch entry b starts at
// base + b batch + h head + i row, and its columns are contiguous. All zero (the default) is the
// contiguous (B, heads, T, width) layout of the reference kernels.
struct RowStrides {
  int64_t batch = 0, head = 0, row = 0;
};

// The layouts of Q, K, V and O; backward writes dQ, dK, dV in the layouts of Q, K, V and reads dO
// in the layout of O (lse, probs and the relative bias's gradient stay contiguous). This is how
// ops::attention_qkv reads the heads in place from the fused projection's (B, T, (H + 2 H_kv) D)
// output and writes O as (B, T, H D): queries {T (H + 2 H_kv) D, D, (H + 2 H_kv) D}, no copies.
struct FlashLayout {
  RowStrides queries, keys, values, out;
};

// As attention_forward_reference; probs, when asked, cost a second sweep per query block.
void flash_attention_forward(const AttentionForwardArgs<float>& a, const FlashLayout& layout = {});

// As attention_backward_reference.
void flash_attention_backward(const AttentionBackwardArgs<float>& a, const FlashLayout& layout = {});

// Bytes of scratch one call allocates when run on `threads` threads (the benchmark reports it).
int64_t flash_attention_scratch_bytes(const AttentionDims& d, int threads, bool backward);

// Whether ops::attention should take the tiled kernel for these dims: the measured rule, unless
// the environment variable TAPEFORMER_ATTENTION is `flash` or `naive` (`auto` or unset: the rule).
bool flash_attention_preferred(const AttentionDims& d, const AttentionMask& mask);

}  // namespace tf::kernels

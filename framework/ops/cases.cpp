// The list of every op's gradient-check cases.
#include "framework/ops/cases.h"

namespace tf {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    ops::add_elementwise_cases(all);
    ops::add_matmul_cases(all);
    ops::add_activation_cases(all);
    ops::add_dropout_cases(all);
    ops::add_layer_norm_cases(all);
    ops::add_embedding_cases(all);
    ops::add_mask_cases(all);
    ops::add_reduce_cases(all);
    ops::add_shape_cases(all);
    ops::add_softmax_cases(all);
    ops::add_cross_entropy_cases(all);
    ops::add_attention_cases(all);
    ops::add_rope_cases(all);
    ops::add_linear_attention_cases(all);
    ops::add_differential_attention_cases(all);
    ops::add_pointwise_cases(all);
    ops::add_causal_conv_cases(all);
    ops::add_selective_scan_cases(all);
    return all;
  }();
  return cases;
}

}  // namespace tf

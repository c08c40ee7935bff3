// Gradient-check cases, one function per op family, each defined in <family>_cases.cpp beside the
// family's ops. Adding an op means adding a case there; cases.cpp gathers the families.
#pragma once
#include <vector>

#include "framework/gradcheck.h"

namespace tf::ops {

void add_elementwise_cases(std::vector<OpCase>& cases);
void add_matmul_cases(std::vector<OpCase>& cases);
void add_activation_cases(std::vector<OpCase>& cases);
void add_dropout_cases(std::vector<OpCase>& cases);
void add_layer_norm_cases(std::vector<OpCase>& cases);
void add_embedding_cases(std::vector<OpCase>& cases);
void add_mask_cases(std::vector<OpCase>& cases);
void add_reduce_cases(std::vector<OpCase>& cases);
void add_shape_cases(std::vector<OpCase>& cases);
void add_softmax_cases(std::vector<OpCase>& cases);
void add_cross_entropy_cases(std::vector<OpCase>& cases);
void add_attention_cases(std::vector<OpCase>& cases);
void add_rope_cases(std::vector<OpCase>& cases);
void add_linear_attention_cases(std::vector<OpCase>& cases);
void add_differential_attention_cases(std::vector<OpCase>& cases);
void add_pointwise_cases(std::vector<OpCase>& cases);
void add_causal_conv_cases(std::vector<OpCase>& cases);
void add_selective_scan_cases(std::vector<OpCase>& cases);

}  // namespace tf::ops

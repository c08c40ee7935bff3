// The list of every op's gradient-check cases.
#include "framework/ops/cases.h"

namespace tf {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    ops::add_elementwise_cases(all);
    ops::add_matmul_cases(all);
    ops::add_attention_cases(all);
    ops::add_rope_cases(all);
    return all;
  }();
  return cases;
}

}  // namespace tf

// Every op case of framework/ops passes the float64 gradient check (one test per case).
#include <gtest/gtest.h>

#include "framework/gradcheck.h"

namespace tf {
namespace {

class OpGradcheck : public ::testing::TestWithParam<size_t> {};

TEST_P(OpGradcheck, MatchesCentralDifferences) {
  const OpCase& c = op_cases()[GetParam()];
  const GradcheckReport report = run_op_case(c);
  EXPECT_TRUE(report.passed()) << c.name << " " << c.shapes << "\n" << report.to_string();
  EXPECT_FALSE(report.tensors.empty()) << c.name << ": no input was checked";
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name;
  for (char ch : op_cases()[info.param].name) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name + "_" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpGradcheck, ::testing::Range<size_t>(0, op_cases().size()), case_name);

}  // namespace
}  // namespace tf

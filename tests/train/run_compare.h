// Bit-for-bit comparison of two training runs, shared by the exact-resume and deterministic tests:
// every parameter of two checkpoints, and every step's logged figures.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/io/hdf5_io.h"
#include "train/run_fixture.h"

namespace tf::testing {

// Every /model dataset of two checkpoints, byte for byte; the names must agree too; and the RNG
// and data positions that a continued run would start from.
inline void expect_same_parameters(const std::filesystem::path& a, const std::filesystem::path& b) {
  const H5Reader ra(a.string()), rb(b.string());
  const std::vector<std::string> names = ra.list("model");
  ASSERT_EQ(names, rb.list("model"));
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    const Tensor ta = ra.read_tensor("model", name), tb = rb.read_tensor("model", name);
    ASSERT_EQ(ta.shape(), tb.shape()) << name;
    ASSERT_EQ(ta.dtype(), tb.dtype()) << name;
    EXPECT_EQ(std::memcmp(ta.raw_data(), tb.raw_data(), ta.nbytes()), 0) << "parameter " << name << " differs";
  }
  EXPECT_EQ(ra.read_u64("rng", "dropout"), rb.read_u64("rng", "dropout"));
  EXPECT_EQ(ra.read_u64("data", "train_batches"), rb.read_u64("data", "train_batches"));
}

// Every step's loss, learning rate and gradient norm, as logged (metrics keep every digit); both
// runs logged `steps` steps, one record each.
inline void expect_same_steps(const std::filesystem::path& metrics_a, const std::filesystem::path& metrics_b,
                              size_t steps) {
  const auto ma = read_metrics(metrics_a), mb = read_metrics(metrics_b);
  ASSERT_EQ(ma.size(), steps);
  ASSERT_EQ(mb.size(), steps);
  for (size_t i = 0; i < ma.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    EXPECT_EQ(ma[i].at("step"), std::to_string(i + 1));
    EXPECT_EQ(mb[i].at("step"), std::to_string(i + 1));
    EXPECT_EQ(number(ma[i], "train_loss"), number(mb[i], "train_loss"));
    EXPECT_EQ(number(ma[i], "lr"), number(mb[i], "lr"));
    EXPECT_EQ(number(ma[i], "grad_norm"), number(mb[i], "grad_norm"));
  }
}

}  // namespace tf::testing

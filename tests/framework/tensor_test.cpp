// Tensor: storage alignment, the sharing semantics stated at the top of framework/tensor.h, dtype
// conversion, and the errors shape and dtype mistakes raise.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "framework/autograd/tape.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/matmul.h"
#include "framework/tensor.h"
#include "support/errors.h"

namespace tf {
namespace {

using testing::error_message;

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

TEST(Tensor, StorageIs64ByteAligned) {
  // Sizes around the 64-byte rounding, including empty and one-element tensors, in every dtype.
  for (DType dtype : {DType::f32, DType::f64, DType::i32}) {
    for (int64_t n : {0, 1, 3, 15, 16, 17, 63, 130, 4097}) {
      const Tensor t = Tensor::empty({n}, dtype);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u) << n << " " << dtype_name(dtype);
    }
  }
}

TEST(Tensor, ViewSharesStorageBothWays) {
  const Tensor x = Tensor::zeros({2, 3});  // (2, 3)
  const Tensor v = x.view({3, 2});        // (3, 2) over the same six floats
  x.data<float>()[4] = 7.0f;              // x[1, 1] is flat 4, which is v[2, 0]
  EXPECT_EQ(v.at(4), 7.0);
  v.data<float>()[1] = -2.0f;  // v[0, 1] is flat 1, which is x[0, 1]
  EXPECT_EQ(x.at(1), -2.0);
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(x.impl().storage, v.impl().storage);

  // A view of a view, flattened, still reaches the same elements.
  const Tensor flat = v.view({6});
  flat.data<float>()[5] = 3.5f;
  EXPECT_EQ(x.at(5), 3.5);
}

TEST(Tensor, ViewRefusesAnotherElementCount) {
  const Tensor x = Tensor::zeros({2, 3});
  const std::string msg = error_message([&] { x.view({4, 2}); });
  EXPECT_TRUE(contains(msg, "view"));
  EXPECT_TRUE(contains(msg, "(2, 3)"));
  EXPECT_TRUE(contains(msg, "(4, 2)"));
}

TEST(Tensor, CloneCopiesData) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  const Tensor c = x.clone();
  EXPECT_NE(x.impl().storage, c.impl().storage);
  c.data<float>()[0] = 100.0f;
  x.data<float>()[3] = -100.0f;
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1, 2, 3, -100}));
  EXPECT_EQ(c.to_vector(), (std::vector<double>{100, 2, 3, 4}));
}

TEST(Tensor, DetachSharesDataButNotGradient) {
  Tensor w = Tensor::from_vector({1, 2, 3}, {3}).set_requires_grad();
  const Tensor c = Tensor::from_vector({4, 5, 6}, {3});
  tape().backward(ops::mul(w, c), Tensor::full({3}, 1.0));
  ASSERT_TRUE(w.grad().defined());

  const Tensor d = w.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_FALSE(d.grad().defined());
  d.data<float>()[0] = 9.0f;  // data is shared
  EXPECT_EQ(w.at(0), 9.0);
  // The original keeps its gradient, and an op on the detached tensor records nothing.
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{4, 5, 6}));
  const Tensor y = ops::mul(d, c);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(tape().size(), 0u);
}

TEST(Tensor, ToConvertsBetweenFloatTypes) {
  // 0.1 is not representable: the f64 copy holds the float32 rounding of it, exactly.
  const Tensor x = Tensor::from_vector({0.1, -2.5, 1e30, 3.0}, {2, 2});
  const Tensor y = x.to(DType::f64);
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_NE(y.impl().storage, x.impl().storage);
  EXPECT_EQ(y.data<double>()[0], static_cast<double>(0.1f));
  EXPECT_EQ(y.data<double>()[1], -2.5);
  EXPECT_EQ(y.data<double>()[2], static_cast<double>(1e30f));

  // And back: f64 -> f32 rounds to nearest.
  const Tensor z = Tensor::from_vector({0.1, 1.0 / 3.0}, {2}, DType::f64).to(DType::f32);
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.data<float>()[0], 0.1f);
  EXPECT_EQ(z.data<float>()[1], 1.0f / 3.0f);

  // Converting to the dtype a tensor already has is the tensor itself, as documented.
  EXPECT_TRUE(x.to(DType::f32).same(x));
}

TEST(Tensor, ShapeErrorsNameTheOpAndBothShapes) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  for (auto [op, f] : {std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>{"add", ops::add},
                       {"sub", ops::sub},
                       {"mul", ops::mul},
                       {"div", ops::div}}) {
    const std::string msg = error_message([&] { f(a, b); });
    EXPECT_TRUE(contains(msg, op));
    EXPECT_TRUE(contains(msg, "(2, 3)"));
    EXPECT_TRUE(contains(msg, "(4,)"));
  }

  const std::string mm = error_message([&] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); });
  EXPECT_TRUE(contains(mm, "matmul"));
  EXPECT_TRUE(contains(mm, "(2, 3)"));
  EXPECT_TRUE(contains(mm, "(4, 5)"));

  const std::string lin = error_message([&] { ops::linear(Tensor::zeros({7, 3}), Tensor::zeros({4, 5})); });
  EXPECT_TRUE(contains(lin, "linear"));
  EXPECT_TRUE(contains(lin, "(7, 3)"));
  EXPECT_TRUE(contains(lin, "(4, 5)"));
}

TEST(Tensor, DtypeMismatchNamesTheOp) {
  const std::string msg = error_message([] { ops::add(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)); });
  EXPECT_TRUE(contains(msg, "add"));
  EXPECT_TRUE(contains(msg, "f32"));
  EXPECT_TRUE(contains(msg, "f64"));
}

TEST(Tensor, RankAboveSixIsRefused) {
  EXPECT_NO_THROW(Tensor::zeros({1, 2, 1, 2, 1, 2}));
  const std::string msg = error_message([] { Tensor::zeros({1, 1, 1, 1, 1, 1, 1}); });
  EXPECT_TRUE(contains(msg, "rank 6"));
  Shape s{1, 2, 3, 4, 5, 6};
  EXPECT_THROW(s.push_back(7), Error);
}

TEST(Tensor, IntTensorsAreRefusedByFloatOps) {
  const Tensor ids = Tensor::from_ids({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ids.dtype(), DType::i32);
  EXPECT_EQ(ids.at(4), 5.0);  // token ids are readable

  // Each message names the op and the offending dtype.
  const std::string add = error_message([&] { ops::add(ids, ids); });
  EXPECT_TRUE(contains(add, "add"));
  EXPECT_TRUE(contains(add, "i32"));
  const std::string scale = error_message([&] { ops::scale(ids, 2.0); });
  EXPECT_TRUE(contains(scale, "scale"));
  EXPECT_TRUE(contains(scale, "i32"));
  const std::string mm = error_message([&] { ops::matmul(ids, ids, false, true); });
  EXPECT_TRUE(contains(mm, "matmul"));
  EXPECT_TRUE(contains(mm, "i32"));
  const std::string lin = error_message([&] { ops::linear(ids, ids); });
  EXPECT_TRUE(contains(lin, "linear"));
  EXPECT_TRUE(contains(lin, "i32"));
  // Mixed with a float tensor: a dtype mismatch, also named.
  const std::string mixed = error_message([&] { ops::mul(Tensor::zeros({2, 3}), ids); });
  EXPECT_TRUE(contains(mixed, "mul"));
  EXPECT_TRUE(contains(mixed, "i32"));
  // A float accessor on an i32 tensor is refused too.
  EXPECT_THROW(ids.data<float>(), Error);
}

}  // namespace
}  // namespace tf

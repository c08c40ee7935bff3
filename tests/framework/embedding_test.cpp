// Embedding: rows gathered by id for ids of any shape, gradients scatter-added with repeated ids
// summing, and out-of-vocabulary ids reported with their position and value.
#include <gtest/gtest.h>

#include "framework/autograd/tape.h"
#include "framework/ops/embedding.h"
#include "support/errors.h"

namespace tf {
namespace {

// Row v of the (4, 3) table is (10v, 10v + 1, 10v + 2): each value names its row and column.
Tensor table(DType dtype) {
  std::vector<double> values;
  for (int v = 0; v < 4; ++v)
    for (int c = 0; c < 3; ++c) values.push_back(10.0 * v + c);
  return Tensor::from_vector(values, {4, 3}, dtype);
}

TEST(Embedding, GathersRowsForIdsOfAnyShape) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor out = ops::embedding(table(dtype), Tensor::from_ids({2, 0, 3, 2}, {2, 2}));
    EXPECT_EQ(out.shape(), (Shape{2, 2, 3}));
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_EQ(out.to_vector(), (std::vector<double>{20, 21, 22, 0, 1, 2, 30, 31, 32, 20, 21, 22}));
  }
  const Tensor one = ops::embedding(table(DType::f32), Tensor::from_ids({1}, {}));  // a single id, rank 0
  EXPECT_EQ(one.shape(), (Shape{3}));
  EXPECT_EQ(one.to_vector(), (std::vector<double>{10, 11, 12}));
  const Tensor none = ops::embedding(table(DType::f32), Tensor::from_ids({}, {2, 0}));
  EXPECT_EQ(none.shape(), (Shape{2, 0, 3}));
}

TEST(Embedding, RepeatedIdsSumTheirGradients) {
  Tensor weight = table(DType::f64).set_requires_grad();
  const Tensor ids = Tensor::from_ids({1, 3, 1, 1}, {4});
  const Tensor out = ops::embedding(weight, ids);
  // Upstream gradient row i = (i + 1) * (1, 10, 100).
  const Tensor dout = Tensor::from_vector({1, 10, 100, 2, 20, 200, 3, 30, 300, 4, 40, 400}, {4, 3}, DType::f64);
  tape().backward(out, dout);
  // Row 1 is used at positions 0, 2, 3: (1 + 3 + 4) * (1, 10, 100); row 3 at position 1; rows 0, 2 unused.
  EXPECT_EQ(weight.grad().to_vector(), (std::vector<double>{0, 0, 0, 8, 80, 800, 0, 0, 0, 2, 20, 200}));
}

TEST(Embedding, ParameterGradientAccumulatesAcrossBackwardCalls) {
  Tensor weight = table(DType::f32).set_requires_grad();
  for (int step = 0; step < 2; ++step) {
    const Tensor out = ops::embedding(weight, Tensor::from_ids({2}, {1}));
    tape().backward(out, Tensor::full({1, 3}, 1.0));
  }
  EXPECT_EQ(weight.grad().to_vector(), (std::vector<double>{0, 0, 0, 0, 0, 0, 2, 2, 2, 0, 0, 0}));
}

std::string error_of(const Tensor& weight, const Tensor& ids) {
  return testing::error_message([&] { ops::embedding(weight, ids); });
}

TEST(Embedding, OutOfVocabularyIdNamesPositionAndValue) {
  EXPECT_EQ(error_of(table(DType::f32), Tensor::from_ids({0, 1, 7, 2}, {2, 2})),
            "embedding: id 7 at position (1, 0) of ids (2, 2) i32 is outside the vocabulary [0, 4)");
  EXPECT_EQ(error_of(table(DType::f32), Tensor::from_ids({3, -1}, {2})),
            "embedding: id -1 at position (1,) of ids (2,) i32 is outside the vocabulary [0, 4)");
  EXPECT_EQ(error_of(table(DType::f32), Tensor::from_ids({4}, {})),
            "embedding: id 4 at position () of ids () i32 is outside the vocabulary [0, 4)");
}

TEST(Embedding, RejectsWrongDtypesAndRanks) {
  EXPECT_EQ(error_of(table(DType::f32), Tensor::from_vector({1, 2}, {2})),
            "embedding: ids must be i32, got (2,) f32");
  EXPECT_EQ(error_of(Tensor::zeros({4}), Tensor::from_ids({1}, {1})),
            "embedding: weight must be a floating-point (V, C) table, got (4,) f32");
}

}  // namespace
}  // namespace tf

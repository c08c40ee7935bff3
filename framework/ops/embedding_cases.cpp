// Gradient-check case for embedding: ids with repeats, so rows must sum their gradients. The ids
// are part of the function (the gradcheck's inputs are the float64 tensors it differentiates).
#include "framework/ops/cases.h"
#include "framework/ops/embedding.h"

namespace tf::ops {

void add_embedding_cases(std::vector<OpCase>& cases) {
  cases.push_back({"embedding", "(6, 4) table, ids (2, 5) with repeats",
                   [](Rng& rng) { return std::vector<Tensor>{gradcheck_input(rng, {6, 4}, "weight")}; },
                   [](const std::vector<Tensor>& in) {
                     const Tensor ids = Tensor::from_ids({3, 0, 3, 5, 1, 1, 3, 2, 0, 5}, {2, 5});  // row 4 unused
                     return embedding(in[0], ids);
                   }});
}

}  // namespace tf::ops

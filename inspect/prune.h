// Head pruning (Michel et al. 2019, "Are Sixteen Heads Really Better than One?", section 4.2): remove
// the least important attention heads for good, making the model smaller and faster.
//
//   HeadImportance scores = head_importance(*loaded.run.model, batcher, 40, /*masked_losses=*/false);
//   PrunePlan plan = plan_pruning(loaded.run.model->config(), scores, /*heads_to_remove=*/5);
//   train::Run pruned = prune_run(std::move(loaded.run), plan);
//   train::save_checkpoint(pruned, loaded.batches, "pruned.h5");
//
// Note [pruning]
// Heads go in order of importance, computed once on the unpruned model and normalised per layer, the
// paper's global ranking. A head is a block of D rows of each of W_Q, and of W_K and W_V for its key/value
// head, and D columns of W_O: removing those rows and columns gives exactly the model whose head has a
// gate of 0 (layers::Context::head_gates), because the head's output reaches the residual stream only
// through its D columns of W_O (Vaswani et al. 2017, eq. for MultiHead; the bias of W_O stays). Under
// grouped-query attention a key/value head serves a group of n_heads / n_kv_heads query heads, so a
// group goes as a whole (its importance is the sum of its heads') and every layer keeps the group size.
// Every layer keeps at least one group: a layer without attention would be another architecture. The
// optimizer's moments are cut the same way, so a pruned checkpoint resumes like any other; ALiBi models
// are refused (their slopes follow a head's index among n_heads, which pruning would change).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inspect/head_importance.h"
#include "train/run.h"

namespace tf::inspect {

// What orders the heads for removal: the paper's per-layer normalised importance, the raw importance
// (comparable across layers), or the loss when the head alone is masked (one evaluation per head).
enum class PruneBy { importance, raw_importance, masked_loss };
PruneBy parse_prune_by(const std::string& name);  // "importance", "raw", "masked"; InputError otherwise
// Sets each score's `importance` to the criterion's figure (larger = kept longer): the normalised or
// raw importance, or masked_loss - loss.
void rank_by(HeadImportance& scores, PruneBy by);

struct PrunePlan {
  std::vector<std::vector<int64_t>> kept;  // per layer, the indices of the query heads kept, ascending
  int64_t removed = 0;                     // query heads removed
  int64_t heads_before = 0;                // query heads of the unpruned model
};

// Removes `heads_to_remove` query heads (rounded down to whole groups), the lowest in importance first
// (ties: the later layer and head first); refuses more than leave each layer one group. InputError when
// the scores do not describe `config`'s heads.
PrunePlan plan_pruning(const layers::ModelConfig& config, const HeadImportance& scores, int64_t heads_to_remove);

// The heads_to_remove of a fraction of all query heads, rounded to the nearest whole group.
int64_t heads_in_fraction(const layers::ModelConfig& config, double fraction);
// The most query heads a plan may remove: all but one group per layer.
int64_t max_removable_heads(const layers::ModelConfig& config);

// The run with the plan's heads removed: model.heads_per_layer and an explicit model.head_dim in its
// recipe, weights and optimizer state cut to the kept heads, counters (step, tokens, run id, time budget)
// as they were. Takes the run apart (its tokenizer moves to the result).
train::Run prune_run(train::Run run, const PrunePlan& plan);

// The gates (layers::Context::head_gates) that mask the heads the plan removes, on the unpruned model:
// what the pruned model must compute.
std::vector<Tensor> pruning_gates(const layers::ModelConfig& config, const PrunePlan& plan, DType dtype);

}  // namespace tf::inspect

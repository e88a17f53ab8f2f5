#include "uneven_split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "testbed/plan_search.h"

namespace testbed::megatron {

absl::StatusOr<std::vector<StageSpec>> UnevenBlockStages(const ModelGraph& model, int pp, int chunks,
                                                         const UnevenSplit& split) {
  if (pp < 1 || chunks < 1) return absl::InvalidArgumentError("pp and chunks must be >= 1");
  const int units = static_cast<int>(UnitBoundaries(model).size()) - 1;
  const bool has_blocks =
      std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& l) { return l.block >= 0; });
  const bool embedding = has_blocks && model.layers.front().block < 0;
  const bool head = has_blocks && model.layers.size() > 1 && model.layers.back().block < 0;
  if (split.embedding_as_block && !embedding) {
    return absl::InvalidArgumentError(absl::StrCat("embedding_as_block: model '", model.shape.name,
                                                   "' has no embedding before its blocks"));
  }
  if (split.head_as_block && !head) {
    return absl::InvalidArgumentError(absl::StrCat("head_as_block: model '", model.shape.name,
                                                   "' has no head after its blocks"));
  }
  if (pp == 1 && (split.first_stage_blocks >= 0 || split.last_stage_blocks >= 0)) {
    return absl::InvalidArgumentError("first_stage_blocks / last_stage_blocks need pp >= 2");
  }
  const int blocks = units - (embedding ? 1 : 0) - (head ? 1 : 0);
  const int e_slot = split.embedding_as_block ? 1 : 0, h_slot = split.head_as_block ? 1 : 0;
  // Slots of the split per pipeline stage: blocks, plus the embedding and head where they count.
  std::vector<int> per_stage(static_cast<size_t>(pp), 0);
  int rest = blocks + e_slot + h_slot, left = pp;
  std::vector<bool> fixed(static_cast<size_t>(pp), false);
  if (split.first_stage_blocks >= 0) {
    per_stage.front() = split.first_stage_blocks + e_slot;
    fixed.front() = true;
    rest -= per_stage.front();
    --left;
  }
  if (split.last_stage_blocks >= 0) {
    per_stage.back() = split.last_stage_blocks + h_slot;
    fixed.back() = true;
    rest -= per_stage.back();
    --left;
  }
  if (rest < 0 || (left == 0 && rest != 0) || (left > 0 && rest % left != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model.shape.name, "': ", blocks, " blocks", e_slot + h_slot > 0 ? " (and the embedding/head counted as blocks)" : "",
        " leave ", rest, " for the other ", left, " pipeline stages, which must share them evenly (Megatron-Core's rule)"));
  }
  for (int s = 0; s < pp; ++s) {
    if (!fixed[static_cast<size_t>(s)]) per_stage[static_cast<size_t>(s)] = rest / left;
  }
  std::vector<int> counts(static_cast<size_t>(pp * chunks), 0);
  for (int s = 0; s < pp; ++s) {
    const int n = per_stage[static_cast<size_t>(s)];
    if (n % chunks != 0) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline stage ", s, " holds ", n, " blocks, which do not divide over its ",
                                                     chunks, " model chunks (Megatron-Core's rule)"));
    }
    for (int c = 0; c < chunks; ++c) counts[static_cast<size_t>(c * pp + s)] = n / chunks;
  }
  // Slots and units run in the same order (embedding, blocks, head); what does not count as a
  // slot joins the first or the last virtual stage.
  if (embedding && !split.embedding_as_block) counts.front() += 1;
  if (head && !split.head_as_block) counts.back() += 1;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("virtual stage ", k, " (pipeline stage ", k % static_cast<size_t>(pp),
                                                     ", chunk ", k / static_cast<size_t>(pp), ") would hold nothing"));
    }
  }
  return StagesFromUnitCounts(model, counts);
}

}  // namespace testbed::megatron

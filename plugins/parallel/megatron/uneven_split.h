// Megatron-Core's uneven pipeline split (decoder_first/last_pipeline_num_layers and
// account_for_embedding/loss_in_pipeline_split): the first and last pipeline stages hold given
// numbers of transformer blocks and the other stages share the rest evenly; the embedding and
// the head may each count as one block of the split. Each stage's count is divided evenly over
// its model chunks (virtual stage k = chunk * pp + stage), as Megatron-Core requires. Llama 3
// 405B's layout (126 blocks, PP 16, 8 chunks; the first chunk only the embedding, the last
// only the head) is embedding_as_block and head_as_block with one unit per chunk.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/plan.h"

namespace testbed::megatron {

struct UnevenSplit {
  int first_stage_blocks = -1;     // transformer blocks on pipeline stage 0; -1: an even share
  int last_stage_blocks = -1;      // ... on the last pipeline stage
  bool embedding_as_block = false;  // the embedding takes one block's place in the split
  bool head_as_block = false;       // the head (output layer and loss) likewise
  [[nodiscard]] bool Even() const noexcept {
    return first_stage_blocks < 0 && last_stage_blocks < 0 && !embedding_as_block && !head_as_block;
  }
};

// The pp x chunks stages (index chunk * pp + stage). Errors name the setting and the counts
// that do not divide, or the virtual stage left empty.
[[nodiscard]] absl::StatusOr<std::vector<StageSpec>> UnevenBlockStages(const ModelGraph& model, int pp, int chunks,
                                                                       const UnevenSplit& split);

}  // namespace testbed::megatron

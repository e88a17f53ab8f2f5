// Sparse embedding communication in the expansion (ExpandOptions::embedding_exchange =
// kAllToAll, EmbRace's sparsity-aware hybrid communication). The replicas of the stage
// holding the embedding own its rows in turn (row r: replica r mod dp) and keep only those
// with their optimizer state. Per iteration, on the sparse-comm stream of every replica:
//   lookup   — the ids of the rows the replica's batch names go to their owners (8 bytes a
//              row) and the rows come back, before its first forward, in one all-to-all-v
//              (each replica sends the ids it asks for and the rows it is asked for; the
//              round trip's second latency is not counted);
//              with embedding_prefetch the rows the previous update did not touch are
//              fetched as soon as the previous lookups are done, and only the updated ones
//              wait for that update;
//   gradient — after the replica's embedding backward, each row's gradient goes to its owner
//              (an all-to-all-v of the rows, ids included);
//   update   — each owner updates the rows it received (a kernel), which the lookups of the
//              iteration `weight_versions` later wait for.
// Row counts per iteration come from StepInput::embedding_rows, or are drawn with the
// scheduling context's TokenModel (testbed/embedding_rows.h).
#pragma once

#include "absl/status/status.h"
#include "expand/expansion.h"

namespace testbed::expand {

// Whether `layer`'s gradient is exchanged sparse (the embedding under kAllToAll).
[[nodiscard]] bool SparseEmbedding(const Expansion& e, int layer);
// What sparse embedding communication needs: an embedding first, an untied head (a tied
// head's gradient touches every row), the embedding's stage at tensor-parallel degree 1, no
// ZeRO sharding, no compressor on it, no context parallelism. InvalidArgument naming what.
[[nodiscard]] absl::Status CheckSparseEmbedding(const Expansion& e);
// Pass 4 for the embedding, every iteration in order.
[[nodiscard]] absl::Status SparseEmbeddingPass(Expansion& e);

}  // namespace testbed::expand

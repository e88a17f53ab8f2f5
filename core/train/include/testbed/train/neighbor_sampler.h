// GraphSAGE neighbour sampling (Hamilton et al. 2017): a mini-batch of seed vertices grows
// outward one hop per fanout, each vertex keeping at most `fanout` of its neighbours, drawn
// without replacement (all of them when it has fewer). Deterministic by the Rng's seed.
//
// The result follows SageMeanLayer's convention: hop k's vertices are the targets of block
// k, and the rows of block k's input are hop k+1's vertices, which begin with hop k's own
// (each target's own features) followed by the neighbours first seen at this hop.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/graph.h"
#include "testbed/train/rng.h"

namespace testbed::train {

struct SampledBatch {
  // hops[0]: the seeds; hops[k + 1]: hops[k], then the vertices first sampled from them.
  std::vector<std::vector<std::int64_t>> hops;
  // blocks[k]: for each vertex of hops[k], its sampled neighbours as indices into hops[k + 1].
  std::vector<Csr> blocks;
  [[nodiscard]] std::int64_t SampledEdges() const;
};

// InvalidArgument for a fanout < 1 (naming it) or a seed outside the graph.
[[nodiscard]] absl::StatusOr<SampledBatch> SampleNeighbors(const Graph& graph, std::span<const std::int64_t> seeds,
                                                           const std::vector<int>& fanouts, Rng& rng);

// The seed batches of epoch `epoch`: `vertices` shuffled by (seed, epoch), cut into batches
// of `batch_size` (the last one shorter).
[[nodiscard]] std::vector<std::vector<std::int64_t>> EpochBatches(const std::vector<std::int64_t>& vertices,
                                                                  std::int64_t batch_size, std::uint64_t seed,
                                                                  std::int64_t epoch);

}  // namespace testbed::train

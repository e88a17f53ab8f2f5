// Neighbour sampling of many mini-batches on CPU threads, as GNN data loaders do while the
// model trains. Batch b of an epoch is sampled with its own Rng, seeded from (seed, epoch, b)
// (BatchSeed), so every batch is the same whatever the number of threads and the order they
// take the batches in, and equal to SampleNeighbors with that Rng.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/neighbor_sampler.h"

namespace testbed::train {

struct SamplingOptions {
  std::vector<int> fanouts;  // per hop, as SampleNeighbors
  std::uint64_t seed = 1;    // with the epoch and the batch's index, each batch's Rng
  std::int64_t epoch = 0;
  int threads = 1;           // >= 1; the calling thread is one of them
};

// The seed of batch `batch` of epoch `epoch` (a mix of the three, distinct per batch).
[[nodiscard]] std::uint64_t BatchSeed(std::uint64_t seed, std::int64_t epoch, std::int64_t batch) noexcept;

// SampleNeighbors of every batch of seeds, batch b with Rng(BatchSeed(seed, epoch, b)), on
// `threads` threads taking batches in turn. Errors: InvalidArgument for threads < 1, and the
// error of the batch with the lowest index that fails (so the same for any thread count),
// prefixed with its index.
[[nodiscard]] absl::StatusOr<std::vector<SampledBatch>> SampleBatches(
    const Graph& graph, const std::vector<std::vector<std::int64_t>>& batches, const SamplingOptions& options);

}  // namespace testbed::train

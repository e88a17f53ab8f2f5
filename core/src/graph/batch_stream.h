// The mini-batches of sampling-based GNN training, the same for the simulator's FeatureLoader::
// Refine and for real training: each data-parallel replica's seeds dealt from shuffled epochs
// and sampled with an Rng of their own, so both backends see the same batches.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph_source.h"
#include "testbed/train/neighbor_sampler.h"

namespace testbed {

// One replica's mini-batches in order: global batch g = (iteration x micro_batches + m) x dp
// + replica of the seeds' epochs (each epoch shuffled by the run's seed, as a distributed
// sampler deals them), sampled with Rng(BatchSeed(seed, epoch, index)).
class BatchStream {
 public:
  BatchStream(const SourceGraph& g, std::vector<int> fanouts, std::int64_t batch_size, std::uint64_t seed, int threads)
      : g_(g), fanouts_(std::move(fanouts)), batch_size_(batch_size), seed_(seed), threads_(threads) {}

  // The sampled batches of global indices `globals` (ascending).
  [[nodiscard]] absl::StatusOr<std::vector<train::SampledBatch>> Sample(const std::vector<std::int64_t>& globals);

  // Global index of replica `replica`'s micro-batch `m` of iteration `it`.
  [[nodiscard]] static std::int64_t Global(std::int64_t it, std::int64_t m, std::int64_t micro_batches, int dp,
                                           int replica) noexcept {
    return (it * micro_batches + m) * dp + replica;
  }
  [[nodiscard]] std::int64_t PerEpoch() const;

 private:
  const std::vector<std::vector<std::int64_t>>& Epoch(std::int64_t epoch);

  const SourceGraph& g_;
  std::vector<int> fanouts_;
  std::int64_t batch_size_;
  std::uint64_t seed_;
  int threads_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::vector<std::int64_t>> epoch_batches_;
};

}  // namespace testbed

#include "graph/batch_stream.h"

#include <thread>

#include "testbed/train/parallel_sampler.h"

namespace testbed {

absl::StatusOr<std::vector<train::SampledBatch>> BatchStream::Sample(const std::vector<std::int64_t>& globals) {
  std::vector<train::SampledBatch> out;
  size_t i = 0;
  while (i < globals.size()) {
    const std::int64_t epoch = globals[i] / PerEpoch();
    const std::vector<std::vector<std::int64_t>>& seeds = Epoch(epoch);
    std::vector<std::vector<std::int64_t>> wanted;
    std::vector<std::int64_t> index;
    for (; i < globals.size() && globals[i] / PerEpoch() == epoch; ++i) {
      index.push_back(globals[i] % PerEpoch());
      wanted.push_back(seeds[static_cast<size_t>(index.back())]);
    }
    // Each batch with the Rng of its index in the epoch, on the threads in turn; the error
    // of the lowest batch wins, whatever the thread count.
    std::vector<absl::StatusOr<train::SampledBatch>> got(wanted.size(), absl::UnknownError("not sampled"));
    auto work = [&](size_t first) {
      for (size_t j = first; j < wanted.size(); j += static_cast<size_t>(threads_)) {
        train::Rng rng(train::BatchSeed(seed_, epoch, index[j]));
        got[j] = train::SampleNeighbors(g_.graph, wanted[j], fanouts_, rng);
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads_ && static_cast<size_t>(t) < wanted.size(); ++t) pool.emplace_back(work, t);
    work(0);
    for (std::thread& t : pool) t.join();
    for (auto& b : got) {
      if (!b.ok()) return b.status();
      out.push_back(*std::move(b));
    }
  }
  return out;
}

std::int64_t BatchStream::PerEpoch() const {
  const auto n = static_cast<std::int64_t>(g_.seeds.size());
  return (n + batch_size_ - 1) / batch_size_;
}

const std::vector<std::vector<std::int64_t>>& BatchStream::Epoch(std::int64_t epoch) {
  if (epoch != cached_epoch_) {
    epoch_batches_ = train::EpochBatches(g_.seeds, batch_size_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return epoch_batches_;
}

}  // namespace testbed

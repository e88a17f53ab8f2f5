#include "testbed/train/parallel_sampler.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"

namespace testbed::train {

std::uint64_t BatchSeed(std::uint64_t seed, std::int64_t epoch, std::int64_t batch) noexcept {
  // SplitMix64's finaliser over the three, so that neighbouring batches and epochs get
  // unrelated Mersenne Twister seeds.
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(epoch) * 0xbf58476d1ce4e5b9ull +
                    static_cast<std::uint64_t>(batch) * 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

absl::StatusOr<std::vector<SampledBatch>> SampleBatches(const Graph& graph,
                                                        const std::vector<std::vector<std::int64_t>>& batches,
                                                        const SamplingOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sampling threads = ", options.threads, "; expected at least 1"));
  }
  const size_t n = batches.size();
  std::vector<std::optional<absl::StatusOr<SampledBatch>>> done(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t b = next.fetch_add(1); b < n; b = next.fetch_add(1)) {
      Rng rng(BatchSeed(options.seed, options.epoch, static_cast<std::int64_t>(b)));
      done[b] = SampleNeighbors(graph, batches[b], options.fanouts, rng);
    }
  };
  std::vector<std::thread> helpers;
  const size_t extra = std::min(n, static_cast<size_t>(options.threads)) - (n > 0 ? 1 : 0);
  for (size_t t = 0; t < extra; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  std::vector<SampledBatch> out;
  out.reserve(n);
  for (size_t b = 0; b < n; ++b) {
    absl::StatusOr<SampledBatch>& r = *done[b];
    if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("batch ", b, ": ", r.status().message()));
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace testbed::train

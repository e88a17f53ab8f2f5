#include "testbed/train/neighbor_sampler.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace testbed::train {

std::int64_t SampledBatch::SampledEdges() const {
  std::int64_t n = 0;
  for (const Csr& b : blocks) n += static_cast<std::int64_t>(b.neighbors.size());
  return n;
}

absl::StatusOr<SampledBatch> SampleNeighbors(const Graph& graph, std::span<const std::int64_t> seeds,
                                             const std::vector<int>& fanouts, Rng& rng) {
  for (size_t k = 0; k < fanouts.size(); ++k) {
    if (fanouts[k] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("fanout[", k, "] = ", fanouts[k], "; each fanout must be >= 1"));
    }
  }
  SampledBatch out;
  out.hops.emplace_back(seeds.begin(), seeds.end());
  for (std::int64_t s : out.hops[0]) {
    if (s < 0 || s >= graph.vertices) {
      return absl::InvalidArgumentError(absl::StrCat("seed vertex ", s, " outside the graph's ", graph.vertices));
    }
  }
  std::vector<std::int64_t> pool;
  for (const int fanout : fanouts) {
    const std::vector<std::int64_t>& targets = out.hops.back();
    std::vector<std::int64_t> next = targets;
    std::unordered_map<std::int64_t, std::int64_t> row;  // vertex -> row in `next`
    row.reserve(targets.size() * static_cast<size_t>(fanout + 1));
    for (size_t i = 0; i < targets.size(); ++i) row.emplace(targets[i], static_cast<std::int64_t>(i));
    Csr block;
    block.offsets.reserve(targets.size() + 1);
    for (std::int64_t t : targets) {
      const std::int64_t begin = graph.adjacency.offsets[static_cast<size_t>(t)];
      const std::int64_t degree = graph.Degree(t);
      pool.assign(graph.adjacency.neighbors.begin() + begin, graph.adjacency.neighbors.begin() + begin + degree);
      // A partial Fisher-Yates shuffle: the first `take` are a uniform sample without replacement.
      const std::int64_t take = std::min<std::int64_t>(fanout, degree);
      for (std::int64_t j = 0; j < take; ++j) {
        const auto pick = j + static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(degree - j)));
        std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(pick)]);
        const std::int64_t u = pool[static_cast<size_t>(j)];
        auto [it, fresh] = row.emplace(u, static_cast<std::int64_t>(next.size()));
        if (fresh) next.push_back(u);
        block.neighbors.push_back(it->second);
      }
      block.offsets.push_back(static_cast<std::int64_t>(block.neighbors.size()));
    }
    out.blocks.push_back(std::move(block));
    out.hops.push_back(std::move(next));
  }
  return out;
}

std::vector<std::vector<std::int64_t>> EpochBatches(const std::vector<std::int64_t>& vertices,
                                                    std::int64_t batch_size, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::vector<std::int64_t>> out;
  if (batch_size < 1) return out;
  Rng rng(seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(epoch));
  const std::vector<std::int64_t> order = rng.Permutation(static_cast<std::int64_t>(vertices.size()));
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size)) {
    std::vector<std::int64_t> batch;
    for (size_t j = i; j < std::min(order.size(), i + static_cast<size_t>(batch_size)); ++j) {
      batch.push_back(vertices[static_cast<size_t>(order[j])]);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace testbed::train

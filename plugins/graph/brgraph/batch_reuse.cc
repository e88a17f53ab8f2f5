#include "batch_reuse.h"

#include <algorithm>
#include <chrono>

namespace testbed::brgraph {

BatchReuse::BatchReuse(const FeatureGraph& graph, std::int64_t extra_rows)
    : detector_(graph.vertices, std::max(1, graph.threads)),
      degrees_(graph.degrees.begin(), graph.degrees.end()),
      extra_rows_(std::max<std::int64_t>(0, extra_rows)),
      in_batch_(static_cast<size_t>(graph.vertices), 0) {}

absl::StatusOr<FeatureLoad> BatchReuse::Next(std::span<const std::int64_t> batch) {
  FeatureLoad load;
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status st = detector_.SetResident(resident_); !st.ok()) return st;
  Detection found;
  if (absl::Status st = detector_.Detect(batch, found); !st.ok()) return st;
  load.detect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  load.copied = std::move(found.fresh);
  load.kept.assign(batch.begin(), batch.end());
  if (extra_rows_ > 0) {
    if (++generation_ == 0) {
      std::fill(in_batch_.begin(), in_batch_.end(), 0);
      generation_ = 1;
    }
    for (std::int64_t v : batch) in_batch_[static_cast<size_t>(v)] = generation_;
    // Rows already on the device that this batch does not read: keep the hottest.
    std::vector<std::int64_t> spare;
    for (std::int64_t v : resident_) {
      if (in_batch_[static_cast<size_t>(v)] != generation_) spare.push_back(v);
    }
    auto hotter = [&](std::int64_t a, std::int64_t b) {
      const std::int64_t da = degrees_[static_cast<size_t>(a)], db = degrees_[static_cast<size_t>(b)];
      return da != db ? da > db : a < b;
    };
    const auto keep = static_cast<std::ptrdiff_t>(std::min<std::int64_t>(extra_rows_, static_cast<std::int64_t>(spare.size())));
    std::partial_sort(spare.begin(), spare.begin() + keep, spare.end(), hotter);
    load.kept.insert(load.kept.end(), spare.begin(), spare.begin() + keep);
  }
  resident_ = load.kept;
  return load;
}

}  // namespace testbed::brgraph

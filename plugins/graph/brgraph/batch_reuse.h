// BRGraph's batch reuse as a feature loader's state (testbed/feature_loader.h): the features
// of the previous batch stay on the device, and a batch copies only its vertices that are not
// resident, found by the parallel duplicate detection (duplicate_detection.h). Two-level
// reuse also keeps, within a budget of rows, features already on the device that the current
// batch does not use but a later one is likely to: the highest-degree ones, since neighbour
// sampling reaches a vertex about in proportion to its degree [inferred: the abstract says
// "likely needed by a later batch", not how that is judged].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "duplicate_detection.h"
#include "testbed/feature_loader.h"

namespace testbed::brgraph {

class BatchReuse {
 public:
  // `extra_rows` rows kept beyond the batch (0: one-level reuse, only the previous batch).
  BatchReuse(const FeatureGraph& graph, std::int64_t extra_rows);

  // C: the batch's vertices not resident, in batch order; K: the batch, then (two-level) the
  // kept extra rows by falling degree. InvalidArgument for a vertex outside the graph.
  [[nodiscard]] absl::StatusOr<FeatureLoad> Next(std::span<const std::int64_t> batch);

 private:
  DuplicateDetector detector_;
  std::vector<std::int64_t> degrees_;
  std::int64_t extra_rows_;
  std::vector<std::int64_t> resident_;
  std::vector<std::uint32_t> in_batch_;  // generation stamps
  std::uint32_t generation_ = 0;
};

}  // namespace testbed::brgraph

// The check every GNN layer makes of its graph before reading it: a malformed graph or a
// neighbour outside the input is an InvalidArgument naming the layer, never a read out of
// bounds.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "testbed/train/sage_layer.h"

namespace testbed::train {

// OK when `graph` has offsets from 0 to neighbors.size() that never decrease, at most `rows`
// targets, and every neighbour a row in [0, rows).
[[nodiscard]] inline absl::Status CheckGraph(const std::string& layer, const Csr& graph, std::int64_t rows) {
  const std::int64_t m = graph.targets();
  if (m < 0 || m > rows || graph.offsets.front() != 0 ||
      graph.offsets.back() != static_cast<std::int64_t>(graph.neighbors.size())) {
    return absl::InvalidArgumentError(absl::StrCat(layer, ": malformed graph (", m, " targets, ", rows, " rows)"));
  }
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t begin = graph.offsets[static_cast<size_t>(i)], end = graph.offsets[static_cast<size_t>(i) + 1];
    if (end < begin) return absl::InvalidArgumentError(absl::StrCat(layer, ": offsets decrease at target ", i));
    for (std::int64_t k = begin; k < end; ++k) {
      const std::int64_t j = graph.neighbors[static_cast<size_t>(k)];
      if (j < 0 || j >= rows) {
        return absl::InvalidArgumentError(absl::StrCat(layer, ": neighbour ", j, " of target ", i, " is not a row of x"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace testbed::train

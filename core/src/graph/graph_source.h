// The graph a feature loader's run trains on (testbed/feature_loader.h, GraphSource): built
// or read once per Refine, with the seed vertices the mini-batches are cut from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/feature_loader.h"
#include "testbed/train/graph.h"

namespace testbed {

struct SourceGraph {
  train::Graph graph;
  std::vector<std::int64_t> seeds;  // training vertices, ascending
  bool generated = false;
  std::string description;          // "rmat (1048576 vertices, 15.7 M edges, seed 1)"
  // The shipped Planetoid graphs only (empty otherwise): each vertex's features and label, the
  // class count and the test split, for real training.
  train::Matrix<float> features;
  std::vector<std::int64_t> labels;
  std::int64_t classes = 0;
  std::vector<std::int64_t> test;
};

// Errors name the parameter (`owner`.graph) and, for files, the file and line.
[[nodiscard]] absl::StatusOr<SourceGraph> LoadSourceGraph(const GraphSource& source, const std::string& owner);

}  // namespace testbed

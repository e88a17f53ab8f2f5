// GraphSAGE layer with mean aggregation: for each target node i,
//   h_i = x_i W_self + mean_{j in N(i)} x_j W_neigh + b.
// Inputs follow the sampled mini-batch convention: rows of x are the sampled nodes, the
// targets come first, and the graph lists each target's neighbours as rows of x.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train {

// Compressed sparse rows: neighbours of target i are neighbors[offsets[i] .. offsets[i+1]).
struct Csr {
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int64_t> neighbors;
  [[nodiscard]] std::int64_t targets() const noexcept { return static_cast<std::int64_t>(offsets.size()) - 1; }
};

template <typename T>
class SageMeanLayer {
 public:
  SageMeanLayer(const std::string& name, std::int64_t in, std::int64_t out, Rng& rng, double init_std = 0);

  // x: [nodes, in]; returns [graph.targets(), out]. A target without neighbours aggregates
  // zeros. InvalidArgument for a malformed graph or a neighbour outside x.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, const Csr& graph, LayerCache<T>& cache);
  // dy: [targets, out]; returns dx for every row of x and accumulates parameter gradients.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache);
  [[nodiscard]] std::vector<Param<T>*> Params() { return {&w_self_, &w_neigh_, &bias_}; }

 private:
  Param<T> w_self_;
  Param<T> w_neigh_;
  Param<T> bias_;
};

}  // namespace testbed::train

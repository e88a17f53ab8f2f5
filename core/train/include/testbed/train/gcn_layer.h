// Graph convolution (Kipf & Welling, ICLR 2017) with the renormalised adjacency
// A^ = D~^-1/2 (A + I) D~^-1/2: for each target i,
//   h_i = sum_{j in N(i) + {i}} x_j W / sqrt((d_i + 1)(d_j + 1)) + b,
// with d the vertices' degrees in the whole graph. Inputs follow SageMeanLayer's convention:
// rows of x are the sampled (or all) vertices, the targets first; the graph lists each
// target's neighbours as rows of x; `degrees` gives each row's vertex degree. The product
// x W comes first (in > out on feature-rich graphs), then the sparse aggregation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/layer.h"
#include "testbed/train/rng.h"
#include "testbed/train/sage_layer.h"

namespace testbed::train {

template <typename T>
class GcnLayer {
 public:
  // Glorot-uniform weights (as the paper), zero bias.
  GcnLayer(const std::string& name, std::int64_t in, std::int64_t out, Rng& rng);

  // x: [rows, in]; returns [graph.targets(), out]. InvalidArgument for a malformed graph, a
  // neighbour outside x, or degrees that are not one per row of x.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, const Csr& graph,
                                                  std::span<const std::int64_t> degrees, LayerCache<T>& cache);
  // dy: [targets, out]; returns dx for every row of x and accumulates the parameters' gradients.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache);
  [[nodiscard]] std::vector<Param<T>*> Params() { return {&weight_, &bias_}; }

 private:
  Param<T> weight_;
  Param<T> bias_;
};

}  // namespace testbed::train

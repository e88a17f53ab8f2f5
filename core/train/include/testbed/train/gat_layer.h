// Graph attention (Veličković et al., "Graph Attention Networks", ICLR 2018). For each head
// k, with weights W_k and attention vector a_k = [a_dst,k ; a_src,k]:
//   z_j = x_j W_k,   e_ij = LeakyReLU(a_dst,k . z_i + a_src,k . z_j),
//   alpha_ij = softmax of e_ij over j in N(i) + {i} (the self-loop always included),
//   h_i^k = sum_j alpha_ij z_j;
// the heads are concatenated (the paper's hidden layers) or averaged (its output layer), then
// a bias is added. Inputs follow SageMeanLayer's convention: rows of x are the sampled (or
// all) vertices, the targets first; the graph lists each target's neighbours as rows of x (a
// neighbour equal to the target is read twice, so pass graphs without self-loops, as
// `Graph` is). The softmax subtracts each target's largest score first.
//
// Not in the layer: the paper's dropout (0.6 on every layer's input and on the attention
// coefficients). Input dropout belongs to the caller (tests/train/gnn_training_test.cc
// applies it to both layers' inputs); attention dropout is not implemented. No nonlinearity
// either: the paper's ELU after the hidden layer is the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/layer.h"
#include "testbed/train/rng.h"
#include "testbed/train/sage_layer.h"

namespace testbed::train {

// How the heads' outputs become the layer's output.
enum class GatCombine {
  kConcat,  // [targets, heads * out]: head k in columns k*out .. (k+1)*out - 1
  kMean,    // [targets, out]: the mean over the heads
};

template <typename T>
class GatLayer {
 public:
  // `heads` >= 1 heads of `out` features each. Glorot-uniform W_k (fan in `in`, fan out `out`)
  // and a_k (the paper's single-layer 2*out -> 1 attention: limit sqrt(6 / (2 out + 1))), as
  // the paper; zero bias when `bias`.
  GatLayer(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t heads, GatCombine combine,
           Rng& rng, bool bias = true, double negative_slope = 0.2);

  // x: [rows, in]; returns [graph.targets(), out_cols()]. InvalidArgument for an input of the
  // wrong width, a malformed graph (offsets not from 0 to neighbors.size(), decreasing, more
  // targets than rows) or a neighbour outside x.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, const Csr& graph, LayerCache<T>& cache);
  // dy: [targets, out_cols()]; returns dx for every row of x (through both the attention
  // scores and the aggregated z) and accumulates the parameters' gradients.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache);
  // weight, att_src, att_dst, then bias if the layer has one.
  [[nodiscard]] std::vector<Param<T>*> Params();

  [[nodiscard]] std::int64_t heads() const noexcept { return heads_; }
  // Columns of the output: heads * out (concatenated) or out (mean).
  [[nodiscard]] std::int64_t out_cols() const noexcept {
    return combine_ == GatCombine::kConcat ? heads_ * out_ : out_;
  }

 private:
  std::int64_t out_;     // features per head
  std::int64_t heads_;   // attention heads
  GatCombine combine_;   // concatenation or mean of the heads
  double slope_;         // LeakyReLU's negative slope on the attention scores (paper: 0.2)
  bool has_bias_;        // whether bias_ is added (and returned by Params)
  Param<T> weight_;      // [in, heads * out]: W_k in columns k*out .. (k+1)*out - 1
  Param<T> att_src_;     // [heads, out]: row k is a_src,k, applied to the neighbour's z_j
  Param<T> att_dst_;     // [heads, out]: row k is a_dst,k, applied to the target's z_i
  Param<T> bias_;        // [1, out_cols()], zero-initialised; unused without bias
};

}  // namespace testbed::train

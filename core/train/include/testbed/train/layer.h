// The layer interface of the training engine. A layer maps an activation matrix to
// another; Forward saves what Backward needs in a cache owned by the caller, so an executor
// can keep many micro-batches in flight through one layer (pipeline schedules), drop a
// cache and recompute it (activation checkpointing), and run any range of layers as a stage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/param.h"
#include "testbed/train/quantize.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

// What one layer saved during one forward pass. Composite layers nest their parts' caches.
template <typename T>
struct LayerCache {
  std::vector<Matrix<T>> tensors;
  std::vector<std::vector<std::int64_t>> indices;
  std::vector<LayerCache<T>> children;

  void Clear() {
    tensors.clear();
    indices.clear();
    children.clear();
  }
  // Bytes held: the activation memory this micro-batch keeps alive in this layer.
  [[nodiscard]] std::int64_t Bytes() const {
    std::int64_t b = 0;
    for (const auto& t : tensors) b += static_cast<std::int64_t>(t.size()) * static_cast<std::int64_t>(sizeof(T));
    for (const auto& i : indices) b += static_cast<std::int64_t>(i.size() * sizeof(std::int64_t));
    for (const auto& c : children) b += c.Bytes();
    return b;
  }
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  // "linear", "gelu", "transformer_block", ...
  [[nodiscard]] virtual std::string kind() const = 0;
  // y = f(x). Replaces `cache` with what Backward needs. InvalidArgument on a shape mismatch.
  [[nodiscard]] virtual absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) = 0;
  // Returns dL/dx given dL/dy and the cache of the matching Forward; adds dL/dparam into each
  // parameter's grad (accumulating over calls). Does not change the cache.
  [[nodiscard]] virtual absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) = 0;
  // The layer's parameters, in a fixed order (empty for parameter-free layers).
  [[nodiscard]] virtual std::vector<Param<T>*> Params() { return {}; }
  // Runs this layer's matrix products at the given widths from now on (fake quantisation,
  // testbed/train/quantize.h); a layer with none (GELU, LayerNorm, an embedding lookup)
  // ignores it. InvalidArgument for an unsupported width.
  [[nodiscard]] virtual absl::Status SetQuantization(const LayerQuant& q) {
    (void)q;
    return absl::OkStatus();
  }
  // A deep copy (weights, gradients, settings): replicas for data parallelism, shards.
  [[nodiscard]] virtual std::unique_ptr<Layer<T>> Clone() const = 0;
};

}  // namespace testbed::train

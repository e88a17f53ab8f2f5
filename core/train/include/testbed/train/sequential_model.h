// A model as a chain of layers, run one layer (or one range of layers) at a time: an
// executor runs a pipeline stage as a range, keeps one cache per layer per micro-batch in
// flight, and lets gradients accumulate over micro-batches before an optimizer step.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/layer.h"

namespace testbed::train {

template <typename T>
class SequentialModel {
 public:
  SequentialModel() = default;
  SequentialModel(SequentialModel&&) noexcept = default;
  SequentialModel& operator=(SequentialModel&&) noexcept = default;
  // Deep copy (a data-parallel replica): cloned layers.
  SequentialModel(const SequentialModel& other);
  SequentialModel& operator=(const SequentialModel& other);
  virtual ~SequentialModel() = default;

  void Add(std::unique_ptr<Layer<T>> layer) { layers_.push_back(std::move(layer)); }
  void Replace(int index, std::unique_ptr<Layer<T>> layer) { layers_[static_cast<size_t>(index)] = std::move(layer); }
  [[nodiscard]] int num_layers() const noexcept { return static_cast<int>(layers_.size()); }
  [[nodiscard]] Layer<T>& layer(int index) { return *layers_[static_cast<size_t>(index)]; }
  [[nodiscard]] const Layer<T>& layer(int index) const { return *layers_[static_cast<size_t>(index)]; }

  // Layers [begin, end) forward; `caches` gets one entry per layer of the range.
  [[nodiscard]] absl::StatusOr<Matrix<T>> ForwardRange(int begin, int end, const Matrix<T>& x,
                                                       std::vector<LayerCache<T>>& caches);
  // Layers [begin, end) backward (end - 1 first) with the caches of the matching ForwardRange.
  [[nodiscard]] absl::StatusOr<Matrix<T>> BackwardRange(int begin, int end, const Matrix<T>& dy,
                                                        const std::vector<LayerCache<T>>& caches);
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, std::vector<LayerCache<T>>& caches) {
    return ForwardRange(0, num_layers(), x, caches);
  }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const std::vector<LayerCache<T>>& caches) {
    return BackwardRange(0, num_layers(), dy, caches);
  }

  // Parameters of layers [begin, end), in layer order then each layer's order.
  [[nodiscard]] std::vector<Param<T>*> ParamsOfLayers(int begin, int end);
  [[nodiscard]] std::vector<Param<T>*> Params() { return ParamsOfLayers(0, num_layers()); }
  void ZeroGrad();
  [[nodiscard]] std::int64_t NumParameters();

 private:
  std::vector<std::unique_ptr<Layer<T>>> layers_;
};

}  // namespace testbed::train

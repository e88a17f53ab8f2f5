// Megatron's column-parallel linear layer: rank r of a tensor-parallel group of `size`
// holds columns [offset, offset + count) of W and b, so its output is that slice of the
// full output. Its input is the full x, replicated on every rank; its Backward returns a
// partial dx that the caller all-reduces (sum) over the group to get the full dx.
#pragma once

#include <vector>

#include "testbed/train/linear.h"
#include "testbed/train/sharding.h"

namespace testbed::train {

template <typename T>
class ColumnParallelLinear final : public Layer<T> {
 public:
  // The shard of `full` for `rank` of `size` (weights copied; gradients start at zero).
  ColumnParallelLinear(const Linear<T>& full, int rank, int size);

  [[nodiscard]] std::string kind() const override { return "column_parallel_linear"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override {
    return shard_.Forward(x, cache);
  }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override {
    return shard_.Backward(dy, cache);
  }
  [[nodiscard]] std::vector<Param<T>*> Params() override { return shard_.Params(); }
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override { return shard_.SetQuantization(q); }
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override {
    return std::make_unique<ColumnParallelLinear>(*this);
  }

  [[nodiscard]] const ShardRange& columns() const noexcept { return columns_; }
  [[nodiscard]] Linear<T>& shard() noexcept { return shard_; }
  [[nodiscard]] const Linear<T>& shard() const noexcept { return shard_; }

  // The full layer (weights and gradients) from every rank's shard, in rank order.
  [[nodiscard]] static Linear<T> Unshard(const std::vector<const ColumnParallelLinear*>& shards);

 private:
  ShardRange columns_;
  Linear<T> shard_;
};

}  // namespace testbed::train

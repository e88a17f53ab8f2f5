// Megatron's row-parallel linear layer: rank r holds rows [offset, offset + count) of W,
// takes the matching columns of the input (the output of a column-parallel layer) and
// returns a partial sum: the caller all-reduces it over the group and then adds the bias,
// which therefore lives with the caller, not here. Backward takes the full dy and returns
// this rank's slice of dx exactly.
#pragma once

#include <vector>

#include "testbed/train/linear.h"
#include "testbed/train/sharding.h"

namespace testbed::train {

template <typename T>
class RowParallelLinear final : public Layer<T> {
 public:
  // The shard of `full` for `rank` of `size`; full's bias is not part of it.
  RowParallelLinear(const Linear<T>& full, int rank, int size);

  [[nodiscard]] std::string kind() const override { return "row_parallel_linear"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override {
    return shard_.Forward(x, cache);
  }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override {
    return shard_.Backward(dy, cache);
  }
  [[nodiscard]] std::vector<Param<T>*> Params() override { return shard_.Params(); }
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override { return shard_.SetQuantization(q); }
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<RowParallelLinear>(*this); }

  [[nodiscard]] const ShardRange& rows() const noexcept { return rows_; }
  [[nodiscard]] Linear<T>& shard() noexcept { return shard_; }
  [[nodiscard]] const Linear<T>& shard() const noexcept { return shard_; }

  // The full weight (and its gradient) from every rank's shard, as a layer without bias.
  [[nodiscard]] static Linear<T> Unshard(const std::vector<const RowParallelLinear*>& shards);

 private:
  ShardRange rows_;
  Linear<T> shard_;
};

}  // namespace testbed::train

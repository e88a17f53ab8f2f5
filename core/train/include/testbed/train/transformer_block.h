// A pre-norm GPT block: h = x + Attn(LN1(x)) + b_o, y = h + W2 GELU(W1 LN2(h) + b1) + b2.
// Built whole, or as a Megatron tensor-parallel shard: attention heads and W1's columns
// split (column-parallel), Wo's and W2's rows split (row-parallel). A shard calls the
// group's all-reduce twice forward (after attention and after the MLP, before the biases)
// and twice backward (the partial gradients at the inputs of the column-parallel parts);
// layer norms and biases are replicated and their gradients come out equal on every rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "testbed/train/attention.h"
#include "testbed/train/column_parallel_linear.h"
#include "testbed/train/gelu.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/row_parallel_linear.h"

namespace testbed::train {

// Sums `m` element-wise over the tensor-parallel group, in place (an executor binds it to
// CommGroup::AllReduce). Every rank must call it the same number of times in the same order.
template <typename T>
using AllReduceFn = std::function<absl::Status(Matrix<T>&)>;

template <typename T>
class TransformerBlock final : public Layer<T> {
 public:
  TransformerBlock(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len,
                   std::int64_t mlp_hidden, Rng& rng, double init_std = 0.02);

  // The shard of `full` for `rank` of `size`, using `all_reduce` for the group's sums.
  [[nodiscard]] static TransformerBlock Shard(const TransformerBlock& full, int rank, int size,
                                              AllReduceFn<T> all_reduce);
  // The full block (weights and gradients) from all shards in rank order. The replicated
  // parameters are taken from rank 0.
  [[nodiscard]] static TransformerBlock Unshard(const std::vector<const TransformerBlock*>& shards);

  [[nodiscard]] std::string kind() const override { return "transformer_block"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<TransformerBlock>(*this); }

  [[nodiscard]] int tp_size() const noexcept { return tp_size_; }

 private:
  TransformerBlock(LayerNorm<T> ln1, CausalSelfAttention<T> attn, Param<T> attn_bias, LayerNorm<T> ln2,
                   ColumnParallelLinear<T> fc1, RowParallelLinear<T> fc2, Param<T> fc2_bias, int tp_size,
                   AllReduceFn<T> all_reduce);
  [[nodiscard]] absl::Status Reduce(Matrix<T>& m) const;

  LayerNorm<T> ln1_;
  CausalSelfAttention<T> attn_;
  Param<T> attn_bias_;
  LayerNorm<T> ln2_;
  ColumnParallelLinear<T> fc1_;
  Gelu<T> gelu_;
  RowParallelLinear<T> fc2_;
  Param<T> fc2_bias_;
  int tp_size_ = 1;
  AllReduceFn<T> all_reduce_;
};

}  // namespace testbed::train

// Causal multi-head self-attention: qkv = x Wqkv + bqkv, per head softmax(q k^T / sqrt(d))
// with future positions masked, then the heads' outputs concatenated and projected by Wo.
// Rows are sequences of seq_len tokens end to end. The output projection has no bias: the
// owning block adds it, after the all-reduce when the layer is tensor-parallel.
//
// Tensor parallelism splits the heads: a shard holds the q, k and v columns of its heads
// (column-parallel) and the matching rows of Wo (row-parallel), so its output and its dx
// are partial sums over the group.
#pragma once

#include <string>
#include <vector>

#include "testbed/train/linear.h"
#include "testbed/train/rng.h"

namespace testbed::train {

template <typename T>
class CausalSelfAttention final : public Layer<T> {
 public:
  CausalSelfAttention(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len, Rng& rng,
                      double init_std = 0.02);

  // The shard of `full` for `rank` of `size`: heads split as evenly as possible (a rank may
  // hold none when size > heads).
  [[nodiscard]] static CausalSelfAttention Shard(const CausalSelfAttention& full, int rank, int size);
  // The full layer, weights and gradients, from all shards in rank order.
  [[nodiscard]] static CausalSelfAttention Unshard(const std::vector<const CausalSelfAttention*>& shards);

  [[nodiscard]] std::string kind() const override { return "causal_self_attention"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  // The QKV and output projections at these widths.
  [[nodiscard]] absl::Status SetQuantization(const LayerQuant& q) override {
    if (absl::Status st = qkv_.SetQuantization(q); !st.ok()) return st;
    LayerQuant second = q;
    second.seed = q.seed + 1;
    return out_.SetQuantization(second);
  }
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override {
    return std::make_unique<CausalSelfAttention>(*this);
  }

  [[nodiscard]] std::int64_t dim() const noexcept { return dim_; }
  [[nodiscard]] int heads() const noexcept { return heads_; }
  [[nodiscard]] int first_head() const noexcept { return first_head_; }
  [[nodiscard]] int local_heads() const noexcept { return local_heads_; }
  [[nodiscard]] std::int64_t head_dim() const noexcept { return dim_ / heads_; }

 private:
  CausalSelfAttention(std::int64_t dim, int heads, int first_head, int local_heads, std::int64_t seq_len,
                      Linear<T> qkv, Linear<T> out);
  // Columns of the full qkv projection that belong to heads [first, first + count).
  [[nodiscard]] static std::vector<std::int64_t> QkvColumns(std::int64_t dim, int heads, int first, int count);

  std::int64_t dim_;
  int heads_;
  int first_head_;
  int local_heads_;
  std::int64_t seq_len_;
  Linear<T> qkv_;
  Linear<T> out_;
};

}  // namespace testbed::train

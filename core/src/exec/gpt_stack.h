// The executor's GPT, layer for layer the same as the core's ModelGraph (embedding, then an
// attention and an MLP layer per block, then the head), so that any plan's stage boundaries
// (including AutoPipe's between a block's attention and MLP) fall on layer boundaries. Built
// from the training engine's primitives; tensor-parallel shards split attention heads and
// MLP columns (Megatron) and sum their partial outputs and input gradients through an
// all-reduce callback. Embedding and head are replicated across tensor-parallel ranks, so
// their collectives in the schedule have nothing to do in real execution.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "testbed/model_graph.h"
#include "testbed/train/attention.h"
#include "testbed/train/column_parallel_linear.h"
#include "testbed/train/expert_parallel_moe.h"
#include "testbed/train/gelu.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/linear.h"
#include "testbed/train/moe_layer.h"
#include "testbed/train/row_parallel_linear.h"
#include "testbed/train/sequential_model.h"
#include "testbed/train/transformer_block.h"

namespace testbed::exec {

using train::AllReduceFn;
using train::LayerCache;
using train::Matrix;

// A tensor-parallel shard whose result an all-reduce over the tensor-parallel group completes
// (Megatron's row-parallel output forward, the column-parallel input gradient backward), in
// two halves around it. The executor runs the all-reduce as the schedule's own task between
// the halves, asynchronously, so that another sub-batch's compute overlaps it; Forward and
// Backward run both halves with the layer's own blocking all-reduce in between.
class SplitAtAllReduce {
 public:
  virtual ~SplitAtAllReduce() = default;
  // Whether the layer is split (tensor-parallel degree above 1).
  [[nodiscard]] virtual bool split() const noexcept = 0;
  // This rank's partial output, to be summed over the group.
  [[nodiscard]] virtual absl::StatusOr<Matrix<float>> ForwardPartial(const Matrix<float>& x, LayerCache<float>& cache) = 0;
  [[nodiscard]] virtual Matrix<float> ForwardFinish(const Matrix<float>& x, const Matrix<float>& reduced) const = 0;
  // This rank's partial input gradient, to be summed over the group (weight gradients are
  // accumulated here).
  [[nodiscard]] virtual absl::StatusOr<Matrix<float>> BackwardPartial(const Matrix<float>& dy, const LayerCache<float>& cache) = 0;
  [[nodiscard]] virtual absl::StatusOr<Matrix<float>> BackwardFinish(const Matrix<float>& dy, const Matrix<float>& reduced,
                                                              const LayerCache<float>& cache) = 0;
};

// x + Attention(LayerNorm(x)) + bias.
class AttentionSublayer final : public train::Layer<float>, public SplitAtAllReduce {
 public:
  AttentionSublayer(const std::string& name, std::int64_t dim, int heads, std::int64_t seq_len, train::Rng& rng,
                    double init_std);
  [[nodiscard]] AttentionSublayer Shard(int rank, int size, AllReduceFn<float> reduce) const;
  [[nodiscard]] std::string kind() const override { return "attention_sublayer"; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> Forward(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> Backward(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override;
  [[nodiscard]] absl::Status SetQuantization(const train::LayerQuant& q) override;
  [[nodiscard]] bool split() const noexcept override { return tp_ > 1; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> ForwardPartial(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] Matrix<float> ForwardFinish(const Matrix<float>& x, const Matrix<float>& reduced) const override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> BackwardPartial(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> BackwardFinish(const Matrix<float>& dy, const Matrix<float>& reduced,
                                                             const LayerCache<float>& cache) override;
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override {
    return std::make_unique<AttentionSublayer>(*this);
  }

 private:
  AttentionSublayer(train::LayerNorm<float> ln, train::CausalSelfAttention<float> attn, train::Param<float> bias,
                    int tp, AllReduceFn<float> reduce)
      : ln_(std::move(ln)), attn_(std::move(attn)), bias_(std::move(bias)), tp_(tp), reduce_(std::move(reduce)) {}
  [[nodiscard]] absl::Status Reduce(Matrix<float>& m) const;

  train::LayerNorm<float> ln_;
  train::CausalSelfAttention<float> attn_;
  train::Param<float> bias_;
  int tp_ = 1;
  AllReduceFn<float> reduce_;
};

// x + W2 GELU(W1 LayerNorm(x) + b1) + b2.
class MlpSublayer final : public train::Layer<float>, public SplitAtAllReduce {
 public:
  MlpSublayer(const std::string& name, std::int64_t dim, std::int64_t hidden, train::Rng& rng, double init_std);
  [[nodiscard]] MlpSublayer Shard(int rank, int size, AllReduceFn<float> reduce) const;
  [[nodiscard]] std::string kind() const override { return "mlp_sublayer"; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> Forward(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> Backward(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override;
  [[nodiscard]] absl::Status SetQuantization(const train::LayerQuant& q) override;
  [[nodiscard]] bool split() const noexcept override { return tp_ > 1; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> ForwardPartial(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] Matrix<float> ForwardFinish(const Matrix<float>& x, const Matrix<float>& reduced) const override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> BackwardPartial(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> BackwardFinish(const Matrix<float>& dy, const Matrix<float>& reduced,
                                                             const LayerCache<float>& cache) override;
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override {
    return std::make_unique<MlpSublayer>(*this);
  }

 private:
  MlpSublayer(train::LayerNorm<float> ln, train::ColumnParallelLinear<float> fc1, train::RowParallelLinear<float> fc2,
              train::Param<float> bias, int tp, AllReduceFn<float> reduce)
      : ln_(std::move(ln)), fc1_(std::move(fc1)), fc2_(std::move(fc2)), bias_(std::move(bias)), tp_(tp),
        reduce_(std::move(reduce)) {}
  [[nodiscard]] absl::Status Reduce(Matrix<float>& m) const;

  train::LayerNorm<float> ln_;
  train::ColumnParallelLinear<float> fc1_;
  train::Gelu<float> gelu_;
  train::RowParallelLinear<float> fc2_;
  train::Param<float> bias_;
  int tp_ = 1;
  AllReduceFn<float> reduce_;
};

// x + MoE(LayerNorm(x)): a mixture-of-experts FFN (top-k gate, GELU experts, dropless), run
// in one process or, after ExpertParallel, with the tokens exchanged between the ranks of an
// expert-parallel group (testbed/train/expert_parallel_moe.h).
class MoeSublayer final : public train::Layer<float> {
 public:
  MoeSublayer(const std::string& name, std::int64_t dim, std::int64_t hidden, int experts, int top_k, train::Rng& rng,
              double init_std);
  // The same weights, run as rank `rank` of `size` with the experts where `holders` says.
  [[nodiscard]] absl::StatusOr<MoeSublayer> ExpertParallel(int rank, int size, train::ExpertHolders holders,
                                                           train::RowExchangeFn<float> exchange) const;
  // New holders (expert-parallel only) from the next Forward on.
  [[nodiscard]] absl::Status SetHolders(train::ExpertHolders holders);
  // Tokens of this rank's micro-batch its gate sent each expert, and tokens each expert
  // computed here, in the Forward that filled `cache`.
  [[nodiscard]] std::vector<std::int64_t> TokensPerExpert(const LayerCache<float>& cache) const;
  [[nodiscard]] std::vector<std::int64_t> ComputedPerExpert(const LayerCache<float>& cache) const;
  [[nodiscard]] int experts() const noexcept { return experts_; }
  // Expert e's parameters: fc1 weight and bias, fc2 weight and bias.
  [[nodiscard]] std::vector<train::Param<float>*> ExpertParams(int e);

  [[nodiscard]] std::string kind() const override { return "moe_sublayer"; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> Forward(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> Backward(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override;
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override {
    return std::make_unique<MoeSublayer>(*this);
  }
  MoeSublayer(const MoeSublayer& other) : ln_(other.ln_), moe_(other.moe_->Clone()), experts_(other.experts_) {}
  MoeSublayer(MoeSublayer&&) noexcept = default;

 private:
  MoeSublayer(train::LayerNorm<float> ln, std::unique_ptr<train::Layer<float>> moe, int experts)
      : ln_(std::move(ln)), moe_(std::move(moe)), experts_(experts) {}

  train::LayerNorm<float> ln_;
  std::unique_ptr<train::Layer<float>> moe_;  // MoeLayer, or ExpertParallelMoe
  int experts_ = 0;
};

// Final LayerNorm and the (untied) projection to vocabulary logits.
class GptHead final : public train::Layer<float> {
 public:
  GptHead(const std::string& name, std::int64_t dim, std::int64_t vocab, train::Rng& rng, double init_std);
  [[nodiscard]] std::string kind() const override { return "gpt_head"; }
  [[nodiscard]] absl::StatusOr<Matrix<float>> Forward(const Matrix<float>& x, LayerCache<float>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<float>> Backward(const Matrix<float>& dy, const LayerCache<float>& cache) override;
  [[nodiscard]] std::vector<train::Param<float>*> Params() override;
  [[nodiscard]] absl::Status SetQuantization(const train::LayerQuant& q) override { return proj_.SetQuantization(q); }
  [[nodiscard]] std::unique_ptr<train::Layer<float>> Clone() const override { return std::make_unique<GptHead>(*this); }

 private:
  train::LayerNorm<float> ln_;
  train::Linear<float> proj_;
};

// The full model for `graph` (a "gpt" or "moe-gpt" family shape with untied embeddings),
// initialised from `seed`. Layer i is ModelGraph layer i.
[[nodiscard]] absl::StatusOr<train::SequentialModel<float>> BuildGptStack(const ModelGraph& graph, std::uint64_t seed);

// The tensor-parallel shard for `rank` of `size` of a model made by BuildGptStack.
[[nodiscard]] train::SequentialModel<float> ShardGptStack(const train::SequentialModel<float>& full, int rank,
                                                           int size, AllReduceFn<float> reduce);

// Whether a parameter (by name) is split across tensor-parallel ranks (attention QKV and
// output projections, the MLP's two weights and first bias) rather than replicated
// (LayerNorms, the biases added after the all-reduce, embedding, head).
[[nodiscard]] bool ParamIsSharded(const std::string& param_name);

}  // namespace testbed::exec

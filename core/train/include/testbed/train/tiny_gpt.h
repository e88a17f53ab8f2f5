// A tiny character-level GPT: token + position embedding, `layers` transformer blocks, a
// final layer norm and a linear head to vocabulary logits. Layer i of the model is:
// 0 the embedding, 1..layers the blocks, layers+1 the final norm, layers+2 the head; input
// is a column of token ids ([batch * seq_len, 1]), output [batch * seq_len, vocab] logits,
// trained with SoftmaxCrossEntropy against the next tokens.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "testbed/train/sequential_model.h"
#include "testbed/train/transformer_block.h"

namespace testbed::train {

struct TinyGptConfig {
  std::int64_t vocab = 64;
  std::int64_t seq_len = 32;
  std::int64_t dim = 64;
  int heads = 4;
  int layers = 2;
  std::int64_t mlp_hidden = 0;  // 0: 4 * dim
  double init_std = 0.02;
  std::uint64_t seed = 1;
};

template <typename T>
class TinyGpt final : public SequentialModel<T> {
 public:
  // InvalidArgument when a size is not positive or heads do not divide dim.
  [[nodiscard]] static absl::StatusOr<TinyGpt> Create(const TinyGptConfig& config);

  // The replica for tensor-parallel rank `rank` of `size`: every block sharded (heads and
  // MLP columns), embedding, final norm and head replicated. Same initial weights as this.
  [[nodiscard]] absl::StatusOr<TinyGpt> TensorParallelShard(int rank, int size, AllReduceFn<T> all_reduce) const;

  [[nodiscard]] const TinyGptConfig& config() const noexcept { return config_; }
  static constexpr int kEmbeddingLayer = 0;
  [[nodiscard]] int first_block() const noexcept { return 1; }
  [[nodiscard]] int end_block() const noexcept { return 1 + config_.layers; }

 private:
  explicit TinyGpt(TinyGptConfig config) : config_(config) {}
  TinyGptConfig config_;
};

}  // namespace testbed::train

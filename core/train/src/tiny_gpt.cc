#include "testbed/train/tiny_gpt.h"

#include "absl/strings/str_cat.h"
#include "testbed/train/embedding.h"
#include "testbed/train/layer_norm.h"
#include "testbed/train/linear.h"

namespace testbed::train {

template <typename T>
absl::StatusOr<TinyGpt<T>> TinyGpt<T>::Create(const TinyGptConfig& config) {
  if (config.vocab < 1 || config.seq_len < 1 || config.dim < 1 || config.heads < 1 || config.layers < 0) {
    return absl::InvalidArgumentError("tiny gpt: vocab, seq_len, dim and heads must be positive, layers >= 0");
  }
  if (config.dim % config.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tiny gpt: ", config.heads, " heads do not divide the hidden size ", config.dim));
  }
  TinyGpt model(config);
  const std::int64_t hidden = config.mlp_hidden > 0 ? config.mlp_hidden : 4 * config.dim;
  Rng rng(config.seed);
  model.Add(std::make_unique<Embedding<T>>("embed", config.vocab, config.dim, config.seq_len, rng, config.init_std));
  for (int b = 0; b < config.layers; ++b) {
    model.Add(std::make_unique<TransformerBlock<T>>(absl::StrCat("block", b), config.dim, config.heads, config.seq_len,
                                                    hidden, rng, config.init_std));
  }
  model.Add(std::make_unique<LayerNorm<T>>("final_norm", config.dim));
  model.Add(std::make_unique<Linear<T>>("head", config.dim, config.vocab, true, rng, config.init_std));
  return model;
}

template <typename T>
absl::StatusOr<TinyGpt<T>> TinyGpt<T>::TensorParallelShard(int rank, int size, AllReduceFn<T> all_reduce) const {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("tiny gpt: tensor-parallel rank ", rank, " of ", size));
  }
  TinyGpt shard(*this);
  for (int i = first_block(); i < end_block(); ++i) {
    const auto* block = dynamic_cast<const TransformerBlock<T>*>(&this->layer(i));
    if (block == nullptr || block->tp_size() != 1) {
      return absl::FailedPreconditionError("tiny gpt: only an unsharded model can be sharded");
    }
    shard.Replace(i, std::make_unique<TransformerBlock<T>>(TransformerBlock<T>::Shard(*block, rank, size, all_reduce)));
  }
  return shard;
}

template class TinyGpt<float>;
template class TinyGpt<double>;

}  // namespace testbed::train

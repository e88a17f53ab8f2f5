// Token embedding plus learned position embedding: row i of the input is a token id (one
// column, see IdsToColumn), and rows are sequences of `seq_len` tokens laid end to end, so
// row i sits at position i % seq_len.
#pragma once

#include <string>

#include "testbed/train/layer.h"
#include "testbed/train/rng.h"

namespace testbed::train {

template <typename T>
class Embedding final : public Layer<T> {
 public:
  // seq_len 0: no position embedding.
  Embedding(const std::string& name, std::int64_t vocab, std::int64_t dim, std::int64_t seq_len, Rng& rng,
            double init_std = 0.02);

  [[nodiscard]] std::string kind() const override { return "embedding"; }
  // x: [tokens, 1] of ids in [0, vocab); tokens a multiple of seq_len. Returns [tokens, dim].
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  // Returns zeros [tokens, 1]: ids have no gradient.
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<Embedding>(*this); }

 private:
  Param<T> tokens_;
  Param<T> positions_;
  std::int64_t seq_len_;
};

}  // namespace testbed::train

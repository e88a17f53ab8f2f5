// A mixture-of-experts layer (GShard / Switch style): a linear gate scores the experts per
// token, softmax gives probabilities, each token goes to its top-k experts, each expert (a
// GELU MLP) takes at most `capacity` tokens, and a token's output is the probability-
// weighted sum of the outputs of the experts that kept it. Tokens an expert had no room for
// are dropped there (they contribute nothing; the residual around the layer carries them).
// Capacity = ceil(capacity_factor * top_k * tokens / experts); first choices of all tokens
// are placed before second choices, each in token order.
#pragma once

#include <string>
#include <vector>

#include "testbed/train/gelu.h"
#include "testbed/train/linear.h"
#include "testbed/train/rng.h"

namespace testbed::train {

struct MoeConfig {
  std::int64_t dim = 0;
  std::int64_t hidden = 0;       // expert MLP width
  int experts = 4;
  int top_k = 1;
  double capacity_factor = 1.25;  // <= 0: unlimited capacity
};

// What one forward pass routed (load balancers and metrics read this).
struct MoeRouting {
  std::vector<std::int64_t> tokens_per_expert;  // kept assignments per expert
  std::int64_t dropped = 0;                     // assignments over capacity
  std::int64_t capacity = 0;
};

// Each token's top-k experts by falling gate probability (ties: the lower index first).
template <typename T>
[[nodiscard]] std::vector<std::vector<int>> TopKChoices(const Matrix<T>& probs, int k);
// The gate's logit gradient from its probabilities' gradient, through the softmax:
// dlogit_j = p_j (dp_j - sum_i p_i dp_i).
template <typename T>
[[nodiscard]] Matrix<T> GateLogitGradient(const Matrix<T>& probs, const Matrix<T>& dprobs);

template <typename T>
class MoeLayer final : public Layer<T> {
 public:
  MoeLayer(const std::string& name, const MoeConfig& config, Rng& rng, double init_std = 0.02);

  [[nodiscard]] std::string kind() const override { return "moe"; }
  [[nodiscard]] absl::StatusOr<Matrix<T>> Forward(const Matrix<T>& x, LayerCache<T>& cache) override;
  [[nodiscard]] absl::StatusOr<Matrix<T>> Backward(const Matrix<T>& dy, const LayerCache<T>& cache) override;
  // Gate weight, then each expert's fc1 weight and bias, fc2 weight and bias.
  [[nodiscard]] std::vector<Param<T>*> Params() override;
  [[nodiscard]] std::unique_ptr<Layer<T>> Clone() const override { return std::make_unique<MoeLayer>(*this); }

  [[nodiscard]] std::int64_t Capacity(std::int64_t tokens) const noexcept;
  // The routing recorded in a cache filled by Forward.
  [[nodiscard]] MoeRouting Routing(const LayerCache<T>& cache) const;
  [[nodiscard]] const MoeConfig& config() const noexcept { return config_; }

 private:
  struct Expert {
    Linear<T> fc1;
    Gelu<T> gelu;
    Linear<T> fc2;
  };

  MoeConfig config_;
  Linear<T> gate_;
  std::vector<Expert> experts_;
};

}  // namespace testbed::train

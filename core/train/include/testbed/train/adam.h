// Adam with bias correction and decoupled weight decay (AdamW):
// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
// w -= lr (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + weight_decay w).
#pragma once

#include <map>

#include "testbed/train/optimizer.h"

namespace testbed::train {

struct AdamOptions {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

template <typename T>
class Adam final : public Optimizer<T> {
 public:
  explicit Adam(AdamOptions options) : options_(options) {}
  [[nodiscard]] std::string kind() const override { return "adam"; }
  void Step(const std::vector<Param<T>*>& params) override;
  void set_learning_rate(double lr) noexcept override { options_.learning_rate = lr; }
  [[nodiscard]] double learning_rate() const noexcept override { return options_.learning_rate; }

 private:
  struct State {
    Matrix<T> m;
    Matrix<T> v;
    std::int64_t steps = 0;
  };
  AdamOptions options_;
  std::map<const Param<T>*, State> state_;
};

}  // namespace testbed::train

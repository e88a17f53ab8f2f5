// Stochastic gradient descent with (heavy-ball) momentum and L2 weight decay:
// v = momentum v + g + weight_decay w;  w -= lr v.
#pragma once

#include <map>

#include "testbed/train/optimizer.h"

namespace testbed::train {

struct SgdOptions {
  double learning_rate = 0.1;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

template <typename T>
class Sgd final : public Optimizer<T> {
 public:
  explicit Sgd(SgdOptions options) : options_(options) {}
  [[nodiscard]] std::string kind() const override { return "sgd"; }
  void Step(const std::vector<Param<T>*>& params) override;
  void set_learning_rate(double lr) noexcept override { options_.learning_rate = lr; }
  [[nodiscard]] double learning_rate() const noexcept override { return options_.learning_rate; }

 private:
  SgdOptions options_;
  std::map<const Param<T>*, Matrix<T>> velocity_;
};

}  // namespace testbed::train

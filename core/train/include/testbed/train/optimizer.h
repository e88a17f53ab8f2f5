// Optimizers update parameters from their accumulated gradients. State (momentum, Adam
// moments) is kept per parameter object, so the same optimizer must always be stepped
// with the same parameters (any subset, e.g. one pipeline stage's).
#pragma once

#include <string>
#include <vector>

#include "testbed/train/param.h"

namespace testbed::train {

template <typename T>
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  [[nodiscard]] virtual std::string kind() const = 0;
  // One update from each parameter's grad. Does not zero the gradients.
  virtual void Step(const std::vector<Param<T>*>& params) = 0;
  virtual void set_learning_rate(double lr) noexcept = 0;
  [[nodiscard]] virtual double learning_rate() const noexcept = 0;
};

}  // namespace testbed::train

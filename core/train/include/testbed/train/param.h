// A trainable parameter: its value and the gradient that backward passes accumulate into
// (summed over micro-batches until the optimizer steps and the caller zeroes it).
#pragma once

#include <string>
#include <utility>

#include "testbed/train/tensor.h"

namespace testbed::train {

template <typename T>
struct Param {
  Param() = default;
  Param(std::string name_in, Matrix<T> value_in)
      : name(std::move(name_in)), value(std::move(value_in)), grad(Matrix<T>::Zero(value.rows(), value.cols())) {}

  void ZeroGrad() { grad.setZero(); }
  [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(value.size()); }

  std::string name;  // "block3.attn.qkv.weight"
  Matrix<T> value;
  Matrix<T> grad;
};

}  // namespace testbed::train

// The losses a classifier trains with, between outputs [rows, classes] and integer labels:
//   cross_entropy — softmax cross-entropy (cross_entropy.h);
//   squared       — half the squared distance to the one-hot label, 1/2 sum_c (z_c - [c = y])^2
//                   per row: with a linear model, least-squares regression, a quadratic convex
//                   problem (the delayed-SGD analysis's first case).
// Both are a sum over rows divided by `normalizer` (default: the rows), as cross_entropy.h says.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/cross_entropy.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

enum class LossKind { kCrossEntropy, kSquared };

// "cross_entropy" or "squared"; InvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<LossKind> LossKindFromName(std::string_view name);

// InvalidArgument when labels and rows differ in number or a label is outside [0, classes).
template <typename T>
[[nodiscard]] absl::StatusOr<LossAndGrad<T>> SquaredError(const Matrix<T>& outputs,
                                                          const std::vector<std::int64_t>& labels,
                                                          double normalizer = 0);

template <typename T>
[[nodiscard]] absl::StatusOr<LossAndGrad<T>> ClassificationLoss(LossKind kind, const Matrix<T>& outputs,
                                                                const std::vector<std::int64_t>& labels,
                                                                double normalizer = 0);

}  // namespace testbed::train

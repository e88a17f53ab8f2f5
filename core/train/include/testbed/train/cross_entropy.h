// Softmax cross-entropy between logits [rows, classes] and integer labels, and accuracy.
// The loss is a sum divided by `normalizer` (by default the number of rows), so that an
// executor splitting a batch into micro-batches can divide by the global count and simply
// add the micro-batches' gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

template <typename T>
struct LossAndGrad {
  double loss = 0;
  Matrix<T> dlogits;  // dL/dlogits
};

// InvalidArgument when labels and rows differ in number or a label is outside [0, classes).
template <typename T>
[[nodiscard]] absl::StatusOr<LossAndGrad<T>> SoftmaxCrossEntropy(const Matrix<T>& logits,
                                                                 const std::vector<std::int64_t>& labels,
                                                                 double normalizer = 0);

// Fraction of rows whose largest logit is at the label (ties: the lowest index wins).
template <typename T>
[[nodiscard]] double Accuracy(const Matrix<T>& logits, const std::vector<std::int64_t>& labels);

}  // namespace testbed::train

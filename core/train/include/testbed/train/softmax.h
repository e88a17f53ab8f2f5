// Numerically stable softmax over each row (max subtracted first). Shared by attention,
// the MoE gate and the cross-entropy loss; the CUDA twin is tested against it.
#pragma once

#include "testbed/train/tensor.h"

namespace testbed::train {

template <typename T>
[[nodiscard]] Matrix<T> SoftmaxRows(const Matrix<T>& x);

}  // namespace testbed::train

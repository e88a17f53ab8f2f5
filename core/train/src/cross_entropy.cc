#include "testbed/train/cross_entropy.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "testbed/train/softmax.h"

namespace testbed::train {

template <typename T>
absl::StatusOr<LossAndGrad<T>> SoftmaxCrossEntropy(const Matrix<T>& logits, const std::vector<std::int64_t>& labels,
                                                   double normalizer) {
  if (static_cast<std::int64_t>(labels.size()) != logits.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross entropy: ", labels.size(), " labels for ", logits.rows(), " rows of logits"));
  }
  const double norm = normalizer > 0 ? normalizer : static_cast<double>(logits.rows());
  LossAndGrad<T> out;
  out.dlogits = SoftmaxRows(logits);
  double total = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const std::int64_t label = labels[static_cast<size_t>(i)];
    if (label < 0 || label >= logits.cols()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cross entropy: label ", label, " outside [0, ", logits.cols(), ") in row ", i));
    }
    // log softmax computed from the logits directly: no log(0) for confident wrong answers.
    const T max = logits.row(i).maxCoeff();
    const double lse =
        static_cast<double>(max) + std::log(static_cast<double>((logits.row(i).array() - max).exp().sum()));
    total += lse - static_cast<double>(logits(i, label));
    out.dlogits(i, label) -= static_cast<T>(1);
  }
  out.loss = total / norm;
  out.dlogits /= static_cast<T>(norm);
  return out;
}

template <typename T>
double Accuracy(const Matrix<T>& logits, const std::vector<std::int64_t>& labels) {
  if (logits.rows() == 0) return 0;
  std::int64_t right = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index best = 0;
    logits.row(i).maxCoeff(&best);
    if (best == labels[static_cast<size_t>(i)]) ++right;
  }
  return static_cast<double>(right) / static_cast<double>(logits.rows());
}

template absl::StatusOr<LossAndGrad<float>> SoftmaxCrossEntropy<float>(const Matrix<float>&,
                                                                       const std::vector<std::int64_t>&, double);
template absl::StatusOr<LossAndGrad<double>> SoftmaxCrossEntropy<double>(const Matrix<double>&,
                                                                         const std::vector<std::int64_t>&, double);
template double Accuracy<float>(const Matrix<float>&, const std::vector<std::int64_t>&);
template double Accuracy<double>(const Matrix<double>&, const std::vector<std::int64_t>&);

}  // namespace testbed::train

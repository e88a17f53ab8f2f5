#include "testbed/train/loss.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace testbed::train {

absl::StatusOr<LossKind> LossKindFromName(std::string_view name) {
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "squared") return LossKind::kSquared;
  return absl::InvalidArgumentError(absl::StrCat("loss: expected \"cross_entropy\" or \"squared\", got \"", std::string(name), "\""));
}

template <typename T>
absl::StatusOr<LossAndGrad<T>> SquaredError(const Matrix<T>& outputs, const std::vector<std::int64_t>& labels,
                                            double normalizer) {
  if (static_cast<std::int64_t>(labels.size()) != outputs.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("squared error: ", labels.size(), " labels for ", outputs.rows(), " rows of outputs"));
  }
  const double norm = normalizer > 0 ? normalizer : static_cast<double>(outputs.rows());
  LossAndGrad<T> out;
  out.dlogits = outputs;  // z - onehot(y), built row by row
  double total = 0;
  for (Eigen::Index i = 0; i < outputs.rows(); ++i) {
    const std::int64_t label = labels[static_cast<size_t>(i)];
    if (label < 0 || label >= outputs.cols()) {
      return absl::InvalidArgumentError(
          absl::StrCat("squared error: label ", label, " outside [0, ", outputs.cols(), ") in row ", i));
    }
    out.dlogits(i, label) -= static_cast<T>(1);
    total += 0.5 * static_cast<double>(out.dlogits.row(i).squaredNorm());
  }
  out.loss = total / norm;
  out.dlogits /= static_cast<T>(norm);
  return out;
}

template <typename T>
absl::StatusOr<LossAndGrad<T>> ClassificationLoss(LossKind kind, const Matrix<T>& outputs,
                                                  const std::vector<std::int64_t>& labels, double normalizer) {
  switch (kind) {
    case LossKind::kSquared:
      return SquaredError<T>(outputs, labels, normalizer);
    case LossKind::kCrossEntropy:
      break;
  }
  return SoftmaxCrossEntropy<T>(outputs, labels, normalizer);
}

template absl::StatusOr<LossAndGrad<float>> SquaredError<float>(const Matrix<float>&,
                                                                const std::vector<std::int64_t>&, double);
template absl::StatusOr<LossAndGrad<double>> SquaredError<double>(const Matrix<double>&,
                                                                  const std::vector<std::int64_t>&, double);
template absl::StatusOr<LossAndGrad<float>> ClassificationLoss<float>(LossKind, const Matrix<float>&,
                                                                      const std::vector<std::int64_t>&, double);
template absl::StatusOr<LossAndGrad<double>> ClassificationLoss<double>(LossKind, const Matrix<double>&,
                                                                        const std::vector<std::int64_t>&, double);

}  // namespace testbed::train

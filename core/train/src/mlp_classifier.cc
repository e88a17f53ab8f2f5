#include "testbed/train/mlp_classifier.h"

#include "absl/strings/str_cat.h"
#include "testbed/train/gelu.h"
#include "testbed/train/linear.h"

namespace testbed::train {

template <typename T>
absl::StatusOr<MlpClassifier<T>> MlpClassifier<T>::Create(const MlpConfig& config) {
  if (config.inputs < 1 || config.classes < 1) {
    return absl::InvalidArgumentError("mlp: inputs and classes must be positive");
  }
  MlpClassifier model(config);
  Rng rng(config.seed);
  std::int64_t width = config.inputs;
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    if (config.hidden[i] < 1) return absl::InvalidArgumentError("mlp: hidden widths must be positive");
    model.Add(std::make_unique<Linear<T>>(absl::StrCat("fc", i), width, config.hidden[i], true, rng));
    model.Add(std::make_unique<Gelu<T>>());
    width = config.hidden[i];
  }
  model.Add(std::make_unique<Linear<T>>("out", width, config.classes, true, rng));
  return model;
}

template class MlpClassifier<float>;
template class MlpClassifier<double>;

}  // namespace testbed::train

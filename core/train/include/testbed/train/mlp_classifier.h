// A multi-layer perceptron classifier: Linear -> GELU for each hidden width, then a
// Linear to class logits. Input rows are samples ([batch, inputs]).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/sequential_model.h"

namespace testbed::train {

struct MlpConfig {
  std::int64_t inputs = 64;
  std::vector<std::int64_t> hidden = {64};
  std::int64_t classes = 10;
  std::uint64_t seed = 1;
};

template <typename T>
class MlpClassifier final : public SequentialModel<T> {
 public:
  [[nodiscard]] static absl::StatusOr<MlpClassifier> Create(const MlpConfig& config);
  [[nodiscard]] const MlpConfig& config() const noexcept { return config_; }

 private:
  explicit MlpClassifier(MlpConfig config) : config_(std::move(config)) {}
  MlpConfig config_;
};

}  // namespace testbed::train

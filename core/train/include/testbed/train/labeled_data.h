// A labelled classification data set in memory, the digits loader that fills one, and a
// deterministic train/validation split.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/train/tensor.h"

namespace testbed::train {

struct LabeledData {
  Matrix<float> features;            // [samples, features]
  std::vector<std::int64_t> labels;  // one per sample
  std::int64_t classes = 0;

  [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(labels.size()); }
  // The listed samples, in that order.
  [[nodiscard]] LabeledData Rows(const std::vector<std::int64_t>& rows) const;
};

// The UCI optical digits CSV (data/digits/digits.csv.gz, plain or gzip): 64 pixel values
// 0..16 then the label 0..9 per line. Features are scaled to [0, 1]. Errors name the file
// and line.
[[nodiscard]] absl::StatusOr<LabeledData> LoadDigits(const std::string& path);

// Shuffles with `seed`, then the last `validation_fraction` of samples are validation.
[[nodiscard]] std::pair<LabeledData, LabeledData> SplitTrainValidation(const LabeledData& data,
                                                                       double validation_fraction,
                                                                       std::uint64_t seed);

}  // namespace testbed::train

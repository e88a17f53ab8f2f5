// A labelled classification data set in memory, the loaders that fill one (the digits CSV,
// IDX image sets such as Fashion-MNIST), and a deterministic train/validation split.
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

// An image classification set in the IDX format of MNIST and Fashion-MNIST, each file
// gzip-compressed or plain: `images_path` starts with the big-endian magic 0x00000803 and
// the sizes [samples, rows, cols] (uint32 each), then one unsigned byte per pixel, image by
// image, row by row; `labels_path` starts with 0x00000801 and [samples], then one unsigned
// byte per label. A feature row is one image, pixel (r, c) at column r * cols + c (a
// 1-channel NCHW row for Conv2d), scaled from 0..255 to [0, 1]. `max_samples` > 0 keeps
// only the first that many. `classes` > 0 requires every label below it; 0 takes the
// largest label + 1 (10 for Fashion-MNIST). Errors name the file: cannot open (NotFound),
// bad magic with the value found, truncated header or data with the bytes expected and read
// (DataLoss), image and label counts that differ, a label out of range (InvalidArgument).
// Debian's dataset-fashion-mnist installs the files under /usr/share/datasets/fashion-mnist/
// (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-*: 60,000 and 10,000 samples
// of 28 x 28 pixels).
[[nodiscard]] absl::StatusOr<LabeledData> LoadIdx(const std::string& images_path, const std::string& labels_path,
                                                  std::int64_t max_samples = 0, std::int64_t classes = 0);

// Shuffles with `seed`, then the last `validation_fraction` of samples are validation.
[[nodiscard]] std::pair<LabeledData, LabeledData> SplitTrainValidation(const LabeledData& data,
                                                                       double validation_fraction,
                                                                       std::uint64_t seed);

}  // namespace testbed::train

#include "testbed/train/labeled_data.h"

#include <zlib.h>

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testbed/train/rng.h"

namespace testbed::train {
namespace {

constexpr int kPixels = 64;
constexpr double kMaxPixel = 16.0;

// Reads a text file, gzip-compressed or not (zlib reads plain files transparently).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) return absl::DataLossError(absl::StrCat(path, ": corrupt or truncated gzip data"));
  return text;
}

}  // namespace

LabeledData LabeledData::Rows(const std::vector<std::int64_t>& rows) const {
  LabeledData out;
  out.classes = classes;
  out.features.resize(static_cast<Eigen::Index>(rows.size()), features.cols());
  for (size_t i = 0; i < rows.size(); ++i) {
    out.features.row(static_cast<Eigen::Index>(i)) = features.row(rows[i]);
    out.labels.push_back(labels[static_cast<size_t>(rows[i])]);
  }
  return out;
}

absl::StatusOr<LabeledData> LoadDigits(const std::string& path) {
  auto text = ReadMaybeGzip(path);
  if (!text.ok()) return text.status();
  std::vector<std::vector<float>> rows;
  std::vector<std::int64_t> labels;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    if (fields.size() != kPixels + 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", fields.size(), " fields, expected ",
                                                     kPixels + 1, " (64 pixels and a label)"));
    }
    std::vector<float> pixels(kPixels);
    for (int i = 0; i <= kPixels; ++i) {
      int v = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[static_cast<size_t>(i)]), &v) ||
          v < 0 || v > (i < kPixels ? 16 : 9)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": field ", i + 1, " '",
                                                       std::string(fields[static_cast<size_t>(i)]),
                                                       i < kPixels ? "' is not a pixel 0..16" : "' is not a label 0..9"));
      }
      if (i < kPixels) {
        pixels[static_cast<size_t>(i)] = static_cast<float>(v / kMaxPixel);
      } else {
        labels.push_back(v);
      }
    }
    rows.push_back(std::move(pixels));
  }
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no samples"));
  LabeledData data;
  data.classes = 10;
  data.labels = std::move(labels);
  data.features.resize(static_cast<Eigen::Index>(rows.size()), kPixels);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int c = 0; c < kPixels; ++c) data.features(static_cast<Eigen::Index>(r), c) = rows[r][static_cast<size_t>(c)];
  }
  return data;
}

std::pair<LabeledData, LabeledData> SplitTrainValidation(const LabeledData& data, double validation_fraction,
                                                         std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> order = rng.Permutation(data.size());
  const auto validation = static_cast<std::int64_t>(validation_fraction * static_cast<double>(data.size()));
  std::vector<std::int64_t> train_rows(order.begin(), order.end() - validation);
  std::vector<std::int64_t> val_rows(order.end() - validation, order.end());
  return {data.Rows(train_rows), data.Rows(val_rows)};
}

}  // namespace testbed::train

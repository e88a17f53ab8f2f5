#include "testbed/train/labeled_data.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testbed/train/rng.h"
#include "text_file.h"

namespace testbed::train {
namespace {

constexpr int kPixels = 64;
constexpr double kMaxPixel = 16.0;

constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr std::uint64_t kIdxMaxPixels = std::uint64_t{1} << 24;  // per image, a sanity bound
constexpr double kIdxMaxPixel = 255.0;

struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// An IDX file opened for reading, gzip or plain.
struct IdxFile {
  std::string path;
  GzHandle handle;
};

absl::StatusOr<IdxFile> OpenIdx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return IdxFile{path, GzHandle(f)};
}

// Appends exactly `bytes` bytes of `file` to `out`, in chunks, so that memory grows with the
// data that actually arrives (a corrupt header can claim any size). DataLoss naming `what`
// with the bytes expected and read when the file ends first.
absl::Status ReadExactly(IdxFile& file, const char* what, std::uint64_t bytes, std::string& out) {
  constexpr std::uint64_t kChunk = 1 << 20;
  std::uint64_t got = 0;
  int n = 0;
  while (got < bytes) {
    const auto want = static_cast<unsigned>(std::min(kChunk, bytes - got));
    const size_t at = out.size();
    out.resize(at + want);
    n = gzread(file.handle.get(), out.data() + at, want);
    out.resize(at + static_cast<size_t>(std::max(n, 0)));
    if (n <= 0) break;
    got += static_cast<std::uint64_t>(n);
  }
  if (got == bytes) return absl::OkStatus();
  int code = Z_OK;
  const char* zmsg = gzerror(file.handle.get(), &code);
  return absl::DataLossError(absl::StrCat(file.path, ": truncated ", what, ": expected ", bytes, " bytes, read ", got,
                                          code != Z_OK && zmsg != nullptr ? absl::StrCat(" (", zmsg, ")") : ""));
}

std::uint32_t BigEndian32(const std::string& bytes, size_t at) {
  std::uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Reads the magic and the `dims` sizes of an IDX header.
absl::StatusOr<std::vector<std::uint64_t>> ReadIdxHeader(IdxFile& file, std::uint32_t magic, size_t dims,
                                                         const char* kind) {
  // The magic first, so that a file of another kind shorter than this header is still
  // reported as one.
  std::string header;
  if (absl::Status s = ReadExactly(file, "IDX magic", 4, header); !s.ok()) return s;
  const std::uint32_t found = BigEndian32(header, 0);
  if (found != magic) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": bad IDX magic 0x", absl::Hex(found, absl::kZeroPad8),
                                                   ", expected 0x", absl::Hex(magic, absl::kZeroPad8), " (", kind,
                                                   ")"));
  }
  if (absl::Status s = ReadExactly(file, "IDX sizes after the magic", 4 * dims, header); !s.ok()) return s;
  std::vector<std::uint64_t> sizes(dims);
  for (size_t d = 0; d < dims; ++d) sizes[d] = BigEndian32(header, 4 * (1 + d));
  return sizes;
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

absl::StatusOr<LabeledData> LoadIdx(const std::string& images_path, const std::string& labels_path,
                                    std::int64_t max_samples, std::int64_t classes) {
  if (max_samples < 0 || classes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": max_samples (", max_samples, ") and classes (",
                                                   classes, ") must not be negative"));
  }
  auto images = OpenIdx(images_path);
  if (!images.ok()) return images.status();
  auto image_sizes = ReadIdxHeader(*images, kIdxImagesMagic, 3, "IDX images: unsigned bytes, 3 dimensions");
  if (!image_sizes.ok()) return image_sizes.status();
  auto labels = OpenIdx(labels_path);
  if (!labels.ok()) return labels.status();
  auto label_sizes = ReadIdxHeader(*labels, kIdxLabelsMagic, 1, "IDX labels: unsigned bytes, 1 dimension");
  if (!label_sizes.ok()) return label_sizes.status();

  const std::uint64_t count = (*image_sizes)[0], rows = (*image_sizes)[1], cols = (*image_sizes)[2];
  if ((*label_sizes)[0] != count) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, " has ", count, " images but ", labels_path, " has ",
                                                   (*label_sizes)[0], " labels"));
  }
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(images_path, ": no samples"));
  if (rows == 0 || cols == 0 || rows * cols > kIdxMaxPixels) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": images of ", rows, " x ", cols,
                                                   " pixels; expected 1 to ", kIdxMaxPixels, " pixels"));
  }
  const std::uint64_t samples =
      max_samples > 0 ? std::min(count, static_cast<std::uint64_t>(max_samples)) : count;
  const std::uint64_t pixels = rows * cols;

  std::string pixel_bytes;
  if (absl::Status s = ReadExactly(*images, "pixel data", samples * pixels, pixel_bytes); !s.ok()) return s;
  std::string label_bytes;
  if (absl::Status s = ReadExactly(*labels, "label data", samples, label_bytes); !s.ok()) return s;

  LabeledData data;
  data.labels.resize(samples);
  std::int64_t largest = 0;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const std::int64_t label = static_cast<unsigned char>(label_bytes[i]);
    if (classes > 0 && label >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", label, " of sample ", i,
                                                     " is out of range for ", classes, " classes"));
    }
    data.labels[i] = label;
    largest = std::max(largest, label);
  }
  data.classes = classes > 0 ? classes : largest + 1;
  data.features.resize(static_cast<Eigen::Index>(samples), static_cast<Eigen::Index>(pixels));
  for (std::uint64_t i = 0; i < samples * pixels; ++i) {
    data.features.data()[i] = static_cast<float>(static_cast<unsigned char>(pixel_bytes[i]) / kIdxMaxPixel);
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

// The feature rows a loader has put on a replica's device, for real training: a slot per
// resident vertex in one buffer (the device's memory; here host memory standing in for it),
// filled only by the loader's copies, so that a batch reading a row no copy brought fails.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "testbed/feature_loader.h"
#include "testbed/train/tensor.h"

namespace testbed {

class DeviceRows {
 public:
  // Rows of `host` (one per vertex) are what copies read.
  explicit DeviceRows(const train::Matrix<float>& host);

  // Applies one answer of a loader for `batch` (empty for Begin): copies load.copied from the
  // host into free slots, gathers `batch`'s rows into `out` (rows in batch order) and then
  // keeps only load.kept. Returns the seconds the copies took. InvalidArgument naming the
  // vertex when the batch reads a row neither resident nor copied, or a kept row is absent.
  [[nodiscard]] absl::StatusOr<double> Apply(const FeatureLoad& load, std::span<const std::int64_t> batch,
                                             train::Matrix<float>* out);

  [[nodiscard]] std::int64_t resident_rows() const noexcept { return resident_; }
  // Slots the buffer has ever needed at once: its size in rows.
  [[nodiscard]] std::int64_t capacity_rows() const noexcept { return static_cast<std::int64_t>(slots_); }

 private:
  // Frees the slots of `rows` whose keep_ mark is clear.
  void Release(const std::vector<std::int64_t>& rows) noexcept;
  [[nodiscard]] float* Row(std::int32_t slot) noexcept { return buffer_.data() + static_cast<size_t>(slot) * cols_; }

  const train::Matrix<float>& host_;
  size_t cols_;
  std::vector<std::int32_t> slot_of_;  // per vertex: its slot, or -1 when not on the device
  std::vector<std::int32_t> free_;
  std::vector<std::int64_t> on_device_;  // the rows kept by the last call
  std::vector<float> buffer_;
  size_t slots_ = 0;
  std::int64_t resident_ = 0;
  std::vector<std::uint8_t> keep_;  // scratch: per vertex, 1 kept after this call, 2 read by it
};

}  // namespace testbed

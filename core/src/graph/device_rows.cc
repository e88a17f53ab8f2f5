#include "graph/device_rows.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace testbed {

DeviceRows::DeviceRows(const train::Matrix<float>& host)
    : host_(host),
      cols_(static_cast<size_t>(host.cols())),
      slot_of_(static_cast<size_t>(host.rows()), -1),
      keep_(static_cast<size_t>(host.rows()), 0) {}

absl::StatusOr<double> DeviceRows::Apply(const FeatureLoad& load, std::span<const std::int64_t> batch,
                                         train::Matrix<float>* out) {
  const auto vertices = static_cast<std::int64_t>(slot_of_.size());
  auto outside = [&](std::int64_t v) { return v < 0 || v >= vertices; };
  for (std::int64_t v : load.copied) {
    if (outside(v)) return absl::InvalidArgumentError(absl::StrCat("copies vertex ", v, ", outside the graph"));
    if (slot_of_[static_cast<size_t>(v)] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("copies vertex ", v, ", already on the device"));
    }
  }
  for (std::int64_t v : load.kept) {
    if (outside(v)) return absl::InvalidArgumentError(absl::StrCat("keeps vertex ", v, ", outside the graph"));
    keep_[static_cast<size_t>(v)] = 1;
  }
  for (std::int64_t v : batch) {
    if (outside(v)) return absl::InvalidArgumentError(absl::StrCat("the batch reads vertex ", v, ", outside the graph"));
    keep_[static_cast<size_t>(v)] |= 2;
  }
  // Rows neither read now nor kept leave before any copy arrives, so the buffer holds at most
  // the batch and what is kept.
  Release(on_device_);
  // Slots first (the buffer grows before any copy, as a device buffer is allocated up front),
  // then the copies, timed alone.
  for (std::int64_t v : load.copied) {
    if (slot_of_[static_cast<size_t>(v)] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("copies vertex ", v, " twice"));
    }
    std::int32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<std::int32_t>(slots_++);
    }
    slot_of_[static_cast<size_t>(v)] = slot;
    ++resident_;
  }
  if (buffer_.size() < slots_ * cols_) buffer_.resize(slots_ * cols_);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t v : load.copied) {
    std::memcpy(Row(slot_of_[static_cast<size_t>(v)]), host_.row(v).data(), cols_ * sizeof(float));
  }
  const double copy_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (out != nullptr) {
    out->resize(static_cast<Eigen::Index>(batch.size()), static_cast<Eigen::Index>(cols_));
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::int64_t v = batch[i];
      if (outside(v) || slot_of_[static_cast<size_t>(v)] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("the batch reads vertex ", v, ", whose row is not on the device"));
      }
      std::memcpy(out->row(static_cast<Eigen::Index>(i)).data(), Row(slot_of_[static_cast<size_t>(v)]),
                  cols_ * sizeof(float));
    }
  }
  for (std::int64_t v : load.kept) {
    if (slot_of_[static_cast<size_t>(v)] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("keeps vertex ", v, ", whose row is not on the device"));
    }
  }
  // Then every row not kept: the batch's own.
  for (std::int64_t v : batch) keep_[static_cast<size_t>(v)] &= 1;
  Release(on_device_);
  Release(load.copied);
  on_device_.assign(load.kept.begin(), load.kept.end());
  for (std::int64_t v : load.kept) keep_[static_cast<size_t>(v)] = 0;
  return copy_s;
}

void DeviceRows::Release(const std::vector<std::int64_t>& rows) noexcept {
  for (std::int64_t v : rows) {
    std::int32_t& slot = slot_of_[static_cast<size_t>(v)];
    if (slot >= 0 && keep_[static_cast<size_t>(v)] == 0) {
      free_.push_back(slot);
      slot = -1;
      --resident_;
    }
  }
}

}  // namespace testbed

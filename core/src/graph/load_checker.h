// Checks each of a feature loader's answers against the contract of testbed/feature_loader.h
// and keeps the resident set it implies, so that a loader that would train a batch on rows
// the device does not hold is refused with the vertex named, not simulated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "testbed/feature_loader.h"

namespace testbed {

class LoadChecker {
 public:
  explicit LoadChecker(std::int64_t vertices);

  // Checks `load`, the answer to `batch` (empty for Begin), against the rows resident before
  // it, then makes load.kept the resident rows. InvalidArgument naming `owner`, the call and
  // the first vertex at fault.
  [[nodiscard]] absl::Status Apply(const FeatureLoad& load, std::span<const std::int64_t> batch,
                                   const std::string& owner, const std::string& call);

  // Rows on the device while the last batch trained: its own and the kept ones.
  [[nodiscard]] std::int64_t device_rows() const noexcept { return device_rows_; }
  [[nodiscard]] std::int64_t resident_rows() const noexcept { return static_cast<std::int64_t>(resident_.size()); }

 private:
  // Marks v in `stamps` for the current generation; false when it already was.
  bool Mark(std::vector<std::uint32_t>& stamps, std::int64_t v) const;
  [[nodiscard]] bool Marked(const std::vector<std::uint32_t>& stamps, std::int64_t v) const {
    return stamps[static_cast<size_t>(v)] == generation_;
  }

  std::int64_t vertices_;
  std::uint32_t generation_ = 0;
  std::vector<std::uint8_t> is_resident_;
  std::vector<std::int64_t> resident_;
  std::vector<std::uint32_t> copied_, in_batch_, kept_;  // generation stamps per vertex
  std::int64_t device_rows_ = 0;
};

}  // namespace testbed

// Shape checks shared by the layers: a mismatch is an InvalidArgument naming the layer,
// never an Eigen assertion (disabled in release builds) or a crash.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace testbed::train {

[[nodiscard]] inline absl::Status CheckCols(const std::string& layer, const char* what, std::int64_t got,
                                            std::int64_t expected) {
  if (got == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(layer, ": ", what, " has ", got, " columns, expected ", expected));
}

[[nodiscard]] inline absl::Status CheckRows(const std::string& layer, const char* what, std::int64_t got,
                                            std::int64_t expected) {
  if (got == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(layer, ": ", what, " has ", got, " rows, expected ", expected));
}

[[nodiscard]] inline absl::Status CheckCache(const std::string& layer, bool ok) {
  if (ok) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(layer, ": backward without a matching forward cache"));
}

}  // namespace testbed::train

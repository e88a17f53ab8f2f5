// The data sets the testbed ships (data/ in the source tree, share/testbed/data when installed).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace testbed {

// `relative` (e.g. "graphs/cora/edges.csv.gz") under each directory of $TESTBED_DATA_PATH
// (':'-separated), then under <executable>/../share/testbed/data. NotFound naming both.
[[nodiscard]] absl::StatusOr<std::string> FindData(const std::string& relative);

}  // namespace testbed

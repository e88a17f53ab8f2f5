// The data movement of the local communicator's collectives. Once every rank has published
// its arguments, each rank moves its own share directly between the members' buffers: for a
// reduction it owns one segment, combines that segment of every member's input in rank
// order (so all ranks get bitwise the same result) and writes it to every output.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "collective_args.h"

namespace testbed::local {

// OK when every member called the same collective with agreeing arguments; otherwise an
// InvalidArgument that names the members that disagree. Deterministic, so every rank comes
// to the same verdict.
[[nodiscard]] absl::Status CheckAgreement(const std::vector<const CollectiveArgs*>& all);

// Does `rank`'s share of the collective whose members' arguments are `all` (already agreed).
void DoShare(int rank, const std::vector<const CollectiveArgs*>& all) noexcept;

}  // namespace testbed::local

// Element-wise reduction of two buffers, the one loop every host-side reduction shares: the
// local communicator's collectives, the mpi communicator's ring all-reduce and the reference
// combination of compressor payloads.
#pragma once

#include <cstdint>

#include "testbed/communicator.h"

namespace testbed {

// dst[i] = op(dst[i], src[i]) for i < count. Plain loops the compiler vectorises; the caller
// fixes the order in which members are combined, so a fixed order gives bitwise the same
// result everywhere. Signed integer sums wrap around (two's complement) instead of being
// undefined. `type` and `op` must be a valid pair (comm_checks::Reduction: kBitOr only on
// unsigned types); an invalid pair leaves dst unchanged.
void ReduceElements(void* dst, const void* src, std::int64_t count, DataType type, ReduceOp op) noexcept;

}  // namespace testbed

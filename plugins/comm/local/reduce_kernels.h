// Element-wise reduction loops of the local communicator: dst[i] = op(dst[i], src[i]).
// Plain loops the compiler vectorises; the caller fixes the order in which members are
// combined, so every rank gets bitwise the same result.
#pragma once

#include <cstdint>

#include "testbed/communicator.h"

namespace testbed::local {

// `type` and `op` must be a valid pair (kBitOr only on unsigned types); checked by the caller.
void Combine(void* dst, const void* src, std::int64_t count, DataType type, ReduceOp op) noexcept;

}  // namespace testbed::local

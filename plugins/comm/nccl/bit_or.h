// The bitwise-OR reduction NCCL lacks: after an all-gather of every member's input into
// `gathered` (member k's elements at k * stride), out[i] = OR over k of gathered[k * stride
// + offset + i]. Compiled by nvcc; returns a cudaError_t value (0 = success).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace testbed::nccl {

int LaunchBitOr(const void* gathered, void* out, std::int64_t count, std::int64_t stride, std::int64_t offset,
                int members, int element_bytes, cudaStream_t stream) noexcept;

}  // namespace testbed::nccl

// CUDA twin of DuplicateDetector::Detect (duplicate_detection.h): the resident vertices are
// marked in a device array of one byte per vertex, each batch vertex classified by one
// thread, and both lists compacted in the batch's order (CUB's stable DeviceSelect), so its
// outputs equal the CPU's exactly. Host buffers in and out. Built only with CUDA (then
// TESTBED_BRGRAPH_HAS_CUDA is defined). C++17 for nvcc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace testbed::brgraph {

// False when the CUDA runtime reports any error (no driver, no device): callers skip.
[[nodiscard]] bool CudaDeviceAvailable() noexcept;

// The batch's vertices in `resident` (duplicates) and the others (fresh), in batch order; ids
// must lie in [0, vertices) (the caller checks, as Detect does). Returns "" or what failed.
[[nodiscard]] std::string DetectDuplicatesCuda(std::int64_t vertices, const std::vector<std::int64_t>& resident,
                                               const std::vector<std::int64_t>& batch,
                                               std::vector<std::int64_t>& duplicates,
                                               std::vector<std::int64_t>& fresh);

}  // namespace testbed::brgraph

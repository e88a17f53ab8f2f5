// Host buffers on a communicator that works on device memory. The executor and the
// compressors keep their tensors in host memory; NCCL reduces GPU memory. MakeHostStaged
// wraps a device-memory endpoint so that it takes host buffers: each operation copies its
// inputs into device blocks, runs the wrapped operation on them, and copies the outputs back
// when the request is waited for (or tested finished), never at the call, so that a rank can
// post a receive and then the matching send without blocking in between.
//
// Device blocks come from a pool per rank that only grows (blocks are reused, released when
// the last endpoint of the rank is gone): freeing device memory can synchronise the device,
// and a device blocked in a collective that waits for this very rank would never return.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testbed/communicator.h"

namespace testbed {

// Device memory of one rank, as a communicator plugin provides it (cudaMalloc and copies on
// the rank's GPU, for nccl). Calls come from any thread driving one of the rank's endpoints
// (sub-groups may be driven from other threads): Allocate and Release one at a time (under the
// pool's lock), ToDevice and ToHost possibly concurrently.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` (> 0) of device memory; an error (out of memory, no device) fails the operation.
  [[nodiscard]] virtual absl::StatusOr<void*> Allocate(std::size_t bytes) = 0;
  // Releases a block from Allocate; called only when no operation uses it.
  virtual void Release(void* block) noexcept = 0;
  // Synchronous copies; `bytes` may be 0.
  [[nodiscard]] virtual absl::Status ToDevice(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  [[nodiscard]] virtual absl::Status ToHost(void* host_dst, const void* device_src, std::size_t bytes) = 0;
};

// An endpoint with memory_space() kHost over `device_group` (whose buffers are `memory`'s).
// Sub-groups made with NewGroup are staged the same way and share the rank's pool. Errors of
// the wrapped operations pass through unchanged; a failed copy is an Internal error naming the
// operation. Requests own their device blocks until they are waited for or destroyed.
[[nodiscard]] std::unique_ptr<CommGroup> MakeHostStaged(std::unique_ptr<CommGroup> device_group,
                                                        std::shared_ptr<DeviceMemory> memory);

}  // namespace testbed

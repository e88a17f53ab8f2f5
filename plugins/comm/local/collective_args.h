// What one rank passed to a collective: the local communicator's ranks publish these to each
// other, check that they agree, and then move data directly between each other's buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "testbed/communicator.h"

namespace testbed::local {

enum class CollectiveKind : std::uint8_t { kAllReduce, kBroadcast, kAllGatherV, kReduceScatterV, kAllToAllV, kBarrier };

[[nodiscard]] const char* CollectiveKindName(CollectiveKind kind) noexcept;

struct CollectiveArgs {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::int64_t count = 0;              // all-reduce, broadcast
  const void* send = nullptr;
  void* recv = nullptr;                // broadcast: the buffer
  std::vector<std::int64_t> counts;    // all-gather-v, reduce-scatter-v; all-to-all-v: send counts
  std::vector<std::int64_t> recv_counts;  // all-to-all-v
};

}  // namespace testbed::local

// Which members of an in-process group have started which collective: every rank of the
// nccl communicator is a thread of this process, so a shared array of counters lets a
// timed-out rank name the ranks that never came (NCCL itself cannot tell).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace testbed::nccl {

class ArrivalBoard {
 public:
  explicit ArrivalBoard(int size);
  // Rank `rank` has started collective `seq` (numbered from 0 in issue order).
  void Started(int rank, std::int64_t seq) noexcept;
  // Ranks that have not started collective `seq`.
  [[nodiscard]] std::vector<int> Missing(std::int64_t seq) const;

 private:
  std::unique_ptr<std::atomic<std::int64_t>[]> started_;
  int size_;
};

}  // namespace testbed::nccl

#include "arrival_board.h"

namespace testbed::nccl {

ArrivalBoard::ArrivalBoard(int size) : started_(new std::atomic<std::int64_t>[static_cast<size_t>(size)]), size_(size) {
  for (int r = 0; r < size; ++r) started_[static_cast<size_t>(r)].store(-1);
}

void ArrivalBoard::Started(int rank, std::int64_t seq) noexcept {
  started_[static_cast<size_t>(rank)].store(seq, std::memory_order_release);
}

std::vector<int> ArrivalBoard::Missing(std::int64_t seq) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (started_[static_cast<size_t>(r)].load(std::memory_order_acquire) < seq) missing.push_back(r);
  }
  return missing;
}

}  // namespace testbed::nccl

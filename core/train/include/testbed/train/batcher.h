// Mini-batches of sample indices, epoch after epoch, each epoch a fresh permutation drawn
// from (seed, epoch): reproducible, and the same on every data-parallel rank, which then
// takes its own slice of each batch.
#pragma once

#include <cstdint>
#include <vector>

namespace testbed::train {

class Batcher {
 public:
  // A last, smaller batch of an epoch is kept unless drop_last.
  Batcher(std::int64_t samples, std::int64_t batch_size, std::uint64_t seed, bool drop_last = false);

  [[nodiscard]] std::vector<std::int64_t> Next();
  [[nodiscard]] std::int64_t epoch() const noexcept { return epoch_; }
  [[nodiscard]] std::int64_t batches_per_epoch() const noexcept;

 private:
  void Shuffle();

  std::int64_t samples_;
  std::int64_t batch_size_;
  std::uint64_t seed_;
  bool drop_last_;
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
  std::vector<std::int64_t> order_;
};

}  // namespace testbed::train

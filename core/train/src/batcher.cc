#include "testbed/train/batcher.h"

#include <algorithm>

#include "testbed/train/rng.h"

namespace testbed::train {

Batcher::Batcher(std::int64_t samples, std::int64_t batch_size, std::uint64_t seed, bool drop_last)
    : samples_(samples), batch_size_(std::max<std::int64_t>(batch_size, 1)), seed_(seed), drop_last_(drop_last) {
  Shuffle();
}

void Batcher::Shuffle() {
  // A fresh generator per epoch: epoch e's order depends only on (seed, e).
  Rng rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch_));
  order_ = rng.Permutation(samples_);
  position_ = 0;
}

std::int64_t Batcher::batches_per_epoch() const noexcept {
  return drop_last_ ? samples_ / batch_size_ : (samples_ + batch_size_ - 1) / batch_size_;
}

std::vector<std::int64_t> Batcher::Next() {
  if (samples_ == 0) return {};
  const std::int64_t left = samples_ - position_;
  if (left == 0 || (drop_last_ && left < batch_size_)) {
    ++epoch_;
    Shuffle();
  }
  const std::int64_t take = std::min(batch_size_, samples_ - position_);
  std::vector<std::int64_t> batch(order_.begin() + position_, order_.begin() + position_ + take);
  position_ += take;
  return batch;
}

}  // namespace testbed::train

#include "testbed/train/delayed_gradients.h"

namespace testbed::train {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit value of (seed, step), no state carried.
std::uint64_t Mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int DelayOfStep(const DelayOptions& options, std::int64_t step) noexcept {
  if (!options.random || options.max_delay <= 0) return options.max_delay > 0 ? options.max_delay : 0;
  const std::uint64_t h = Mix(Mix(options.seed) ^ static_cast<std::uint64_t>(step));
  // Multiply-shift onto [0, max_delay]: unbiased to within 2^-32 for delays this small.
  const std::uint64_t range = static_cast<std::uint64_t>(options.max_delay) + 1;
  return static_cast<int>(((h >> 32) * range) >> 32);
}

template <typename T>
std::optional<int> DelayedGradients<T>::Exchange(const std::vector<Param<T>*>& params) {
  std::vector<Matrix<T>> now;
  now.reserve(params.size());
  for (const Param<T>* p : params) now.push_back(p->grad);
  history_.push_back(std::move(now));
  while (history_.size() > static_cast<size_t>(options_.max_delay) + 1) history_.pop_front();
  const int tau = DelayOfStep(options_, step_);
  ++step_;
  // history_[size - 1 - tau] is step t - tau when that step has happened.
  if (static_cast<size_t>(tau) >= history_.size()) {
    for (Param<T>* p : params) p->ZeroGrad();
    return std::nullopt;
  }
  const std::vector<Matrix<T>>& applied = history_[history_.size() - 1 - static_cast<size_t>(tau)];
  for (size_t i = 0; i < params.size(); ++i) params[i]->grad = applied[i];
  return tau;
}

template class DelayedGradients<float>;
template class DelayedGradients<double>;

}  // namespace testbed::train

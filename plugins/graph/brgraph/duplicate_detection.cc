#include "duplicate_detection.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

namespace testbed::brgraph {
namespace {

// Below this many ids per thread, extra threads cost more than they save.
constexpr size_t kMinPerThread = 4096;

}  // namespace

DuplicateDetector::DuplicateDetector(std::int64_t vertices, int threads)
    : vertices_(std::max<std::int64_t>(vertices, 0)),
      threads_(std::max(threads, 1)),
      stamp_(std::make_unique<std::atomic<std::uint32_t>[]>(static_cast<size_t>(vertices_))) {}  // zeroed

size_t DuplicateDetector::Parts(size_t n) const noexcept {
  return std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(threads_), n / kMinPerThread));
}

template <typename Fn>
void DuplicateDetector::Slices(size_t n, Fn&& fn) {
  const size_t parts = Parts(n);
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < parts; ++t) helpers.emplace_back([&, t] { fn(t, n * t / parts, n * (t + 1) / parts); });
  fn(size_t{0}, size_t{0}, n / parts);
  for (std::thread& h : helpers) h.join();
}

absl::Status DuplicateDetector::SetResident(std::span<const std::int64_t> resident) {
  if (++generation_ == 0) {  // wrapped: no stamp may look current
    for (std::int64_t v = 0; v < vertices_; ++v) stamp_[static_cast<size_t>(v)].store(0, std::memory_order_relaxed);
    generation_ = 1;
  }
  for (size_t i = 0; i < resident.size(); ++i) {
    if (resident[i] < 0 || resident[i] >= vertices_) {
      ++generation_;  // forget the part stamped so far
      return absl::InvalidArgumentError(absl::StrCat("resident vertex ", resident[i], " (position ", i,
                                                     ") is not in the graph of ", vertices_, " vertices"));
    }
  }
  const std::uint32_t g = generation_;
  Slices(resident.size(), [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) stamp_[static_cast<size_t>(resident[i])].store(g, std::memory_order_relaxed);
  });
  return absl::OkStatus();
}

absl::Status DuplicateDetector::Detect(std::span<const std::int64_t> batch, Detection& out) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i] < 0 || batch[i] >= vertices_) {
      return absl::InvalidArgumentError(absl::StrCat("batch vertex ", batch[i], " (position ", i,
                                                     ") is not in the graph of ", vertices_, " vertices"));
    }
  }
  const std::uint32_t g = generation_;
  const size_t n = batch.size();
  // One flag per id and per slice its count of duplicates; a prefix sum turns the counts into
  // where each slice's duplicates start.
  const size_t parts = Parts(n);
  std::vector<std::uint8_t> dup(n);
  std::vector<size_t> dup_at(parts + 1, 0);
  Slices(n, [&](size_t t, size_t begin, size_t end) {
    size_t c = 0;
    for (size_t i = begin; i < end; ++i) {
      dup[i] = stamp_[static_cast<size_t>(batch[i])].load(std::memory_order_relaxed) == g ? 1 : 0;
      c += dup[i];
    }
    dup_at[t + 1] = c;
  });
  for (size_t t = 0; t < parts; ++t) dup_at[t + 1] += dup_at[t];
  out.duplicates.resize(dup_at[parts]);
  out.fresh.resize(n - dup_at[parts]);
  Slices(n, [&](size_t t, size_t begin, size_t end) {
    size_t d = dup_at[t], f = begin - dup_at[t];
    for (size_t i = begin; i < end; ++i) {
      if (dup[i] != 0) {
        out.duplicates[d++] = batch[i];
      } else {
        out.fresh[f++] = batch[i];
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace testbed::brgraph

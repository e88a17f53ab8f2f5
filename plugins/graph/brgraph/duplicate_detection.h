// BRGraph's duplicate detection: which vertices of a mini-batch already have their features
// on the device (the previous batch's, kept there), so that only the others are copied from
// the host. Parallel on CPU threads, in O(batch + resident) work: the resident vertices are
// stamped in a per-vertex array (one stamp per generation, so nothing is cleared between
// batches), then each thread classifies a contiguous slice of the batch, counts, and writes
// its duplicates and fresh vertices at offsets from a prefix sum, keeping the batch's order.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace testbed::brgraph {

struct Detection {
  std::vector<std::int64_t> duplicates;  // batch vertices that are resident, in batch order
  std::vector<std::int64_t> fresh;       // the others (to copy host to device), in batch order
};

class DuplicateDetector {
 public:
  // Vertex ids lie in [0, vertices); `threads` >= 1 work on a batch (the caller's among them).
  DuplicateDetector(std::int64_t vertices, int threads);

  // The vertices now resident on the device (replacing the previous set). InvalidArgument for
  // an id outside the graph; the resident set is then empty.
  [[nodiscard]] absl::Status SetResident(std::span<const std::int64_t> resident);
  // Splits `batch` (distinct ids) into resident and fresh vertices. InvalidArgument naming the
  // first id outside the graph.
  [[nodiscard]] absl::Status Detect(std::span<const std::int64_t> batch, Detection& out);

  [[nodiscard]] std::int64_t vertices() const noexcept { return vertices_; }
  [[nodiscard]] int threads() const noexcept { return threads_; }

 private:
  // How many slices a range of n ids is cut into (at most threads_).
  [[nodiscard]] size_t Parts(size_t n) const noexcept;
  // Runs fn(t, begin, end) for the Parts(n) slices t of [0, n), each on its own thread.
  template <typename Fn>
  void Slices(size_t n, Fn&& fn);

  std::int64_t vertices_;
  int threads_;
  std::uint32_t generation_ = 0;
  // stamp_[v] == generation_: v is resident. Atomic so that slices may stamp at once.
  std::unique_ptr<std::atomic<std::uint32_t>[]> stamp_;
};

}  // namespace testbed::brgraph
